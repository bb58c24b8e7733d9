"""Volcano, the batch scheduler MindCluster clusters place NPU work with: the queue a service's pods join.

Why a model of its own: Volcano reads its settings from annotations, so the contract is another project's
keys, pinned here with the source that reads them (volcano.sh/apis v1.12.1
pkg/apis/scheduling/v1beta1/labels.go:48 `QueueNameAnnotationKey`):
- a single-node engine pod (and a router pod): Volcano's PodGroup controller makes a one-member PodGroup
  for every pod whose schedulerName is one of its own and that names no group, taking spec.queue from the
  pod's `scheduling.volcano.sh/queue-name` annotation (volcano-sh/volcano
  pkg/controllers/podgroup/pg_controller.go:162-175, pg_controller_handler.go:301-331, :400-402);
- a multi-node group: LeaderWorkerSet v0.7.0 creates one PodGroup per group, minMember = the group's size
  (so all of its pods or none are bound), when its manager runs with `gangSchedulingManagement.
  schedulerProvider: volcano` (api/config/v1alpha1/configuration_types.go:37-38, :135-139; cmd/main.go:194-205);
  the queue is the LeaderWorkerSet's own `scheduling.volcano.sh/queue-name` annotation
  (pkg/schedulerprovider/volcano_provider.go:47-98), and its pod webhook writes the group's name into each
  pod's `scheduling.k8s.io/group-name` (volcano_provider.go:100-106), which Volcano's controller then
  leaves alone (pg_controller.go:167-170). The operator never makes a PodGroup itself (docs/deploy.md).
"""

from pydantic import Field

from ascend_operator.api.base import ApiModel

#: Where Volcano and LWS's Volcano provider read a pod's or a LeaderWorkerSet's queue.
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
#: Where LWS's webhook writes a group pod's PodGroup and Volcano's scheduler reads it (labels.go:32).
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
#: The name Volcano's scheduler answers to unless started with another `--scheduler-name`.
VOLCANO_SCHEDULER = "volcano"
#: A Kubernetes object name (DNS-1123 subdomain): what the API server accepts for a pod's schedulerName
#: and priorityClassName and for a Queue's name (spec.py has the same pattern for other names).
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class VolcanoSpec(ApiModel):
    """Volcano's settings for the service's pods; needs spec.scheduling.schedulerName (Volcano's name)."""

    queue: str = Field(
        pattern=DNS_SUBDOMAIN,
        max_length=253,
        description="The Volcano Queue (scheduling.volcano.sh/v1beta1, cluster-scoped) the service's pods "
        "join: written as the `scheduling.volcano.sh/queue-name` annotation on engine and router pods and "
        "on the LeaderWorkerSet, whose Volcano provider copies it into each group's PodGroup. Unset: "
        "Volcano's `default` queue.",
    )
