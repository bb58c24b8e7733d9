"""The LeaderWorkerSet a multi-node service becomes: one group of `nodes` pods per replica.

Pure, like render/pod.py, and built from the same pod builders with a role (render/group.py), so a
leader differs from a single-node pod only by the group flags and network env. The shape is the real
`leaderworkerset.x-k8s.io/v1` type of sigs.k8s.io/lws v0.7.0 (api/leaderworkerset/v1/leaderworkerset_types.go):
- `replicas` = spec.replicas groups, `leaderWorkerTemplate.size` = spec.parallelism.nodes pods per group;
- `restartPolicy: RecreateGroupOnPodRestart` (types.go:313): a data-parallel group with a lost peer cannot
  recover in place, so any pod's restart or deletion recreates the whole group. The operator rolls a
  group by deleting its leader pod;
- `startupPolicy: LeaderCreated` (types.go:333): workers start with the leader, not after it is Ready -
  the leader's canary can only pass once every worker joined, so LeaderReady would never start them;
- the rolling update takes at most spec.rollout.maxUnavailable groups out at once, the operator's own budget
  (disruption/decide.py), and never surges: every pod holds a whole node's NPUs, so a surge group would
  wait for NPUs that only the groups it is meant to replace hold.
The LWS is named `<service>-group`: LWS creates a headless Service named after it for the pods' DNS
subdomain (pkg/utils/controller/controller_utils.go:32-64) and skips that when a Service of the name
exists, so it may not share the name of the operator's ClusterIP Service.
With spec.scheduling.schedulerName `volcano`, a group is gang-scheduled by LWS's own Volcano provider (one
PodGroup per group, minMember = size), which the LWS manager's configuration turns on; the set only carries
the queue (api/scheduling.py, docs/deploy.md).
"""

from collections.abc import Sequence
from typing import Any

from ascend_operator.api.constants import (
    ANNOTATION_SPEC_HASH,
    GROUP,
    LWS_API_VERSION,
    LWS_KIND,
    NPU_RESOURCE,
)
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.render.group import Role
from ascend_operator.render.pod import Owner, build_pod_spec, common_labels, engine_digest, owner_metadata
from ascend_operator.render.scheduling import queue_annotations

LABEL_ROLE = f"{GROUP}/role"
LWS_SUFFIX = "-group"
#: On the set: the leader (uid, spec hash) the operator last saw per group, so a group LWS recreated on its
#: own is recorded in status.rolls, also across an operator restart (controller/deletions.py observe_groups).
ANNOTATION_LEADERS = f"{GROUP}/leaders"


def lws_name(owner: Owner) -> str:
    """Name of a service's LeaderWorkerSet; its leader pods are `<name>-<group>`."""
    return f"{owner.name}{LWS_SUFFIX}"


def is_multi_node(spec: AscendInferenceServiceSpec) -> bool:
    """Whether the spec renders a LeaderWorkerSet instead of plain pods."""
    return spec.parallelism.nodes > 1


def group_spec_hash(spec: AscendInferenceServiceSpec) -> str:
    """A digest of both templates and the group size: a changed hash means roll the groups. Like the single
    pod's hash, it leaves out the probes the operator renders (render/pod.py spec_hash)."""
    body = {
        "size": spec.parallelism.nodes,
        "leader": build_pod_spec(spec, role=Role.LEADER),
        "worker": build_pod_spec(spec, role=Role.WORKER),
    }
    body.update(queue_annotations(spec))  # Volcano reads the queue when a group's PodGroup is made
    return engine_digest(body)


def _template(
    spec: AscendInferenceServiceSpec,
    owner: Owner,
    role: Role,
    digest: str,
    npu_resource: str,
    driver_versions: Sequence[str] | None,
) -> dict[str, Any]:
    return {
        "metadata": {
            "labels": {**common_labels(owner), LABEL_ROLE: role.value},
            "annotations": {**queue_annotations(spec), ANNOTATION_SPEC_HASH: digest},
        },
        "spec": build_pod_spec(spec, role=role, npu_resource=npu_resource, driver_versions=driver_versions),
    }


def build_leader_worker_set(
    spec: AscendInferenceServiceSpec,
    *,
    owner: Owner,
    npu_resource: str = NPU_RESOURCE,
    driver_versions: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The LeaderWorkerSet of a multi-node service."""
    digest = group_spec_hash(spec)
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": LWS_KIND,
        "metadata": {
            "name": lws_name(owner),
            "namespace": owner.namespace,
            "labels": common_labels(owner),
            # LWS's Volcano provider copies the set's queue into each group's PodGroup (api/scheduling.py)
            "annotations": {**queue_annotations(spec), ANNOTATION_SPEC_HASH: digest},
            **owner_metadata(owner),
        },
        "spec": {
            "replicas": spec.replicas,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxUnavailable": spec.rollout.max_unavailable, "maxSurge": 0},
            },
            "leaderWorkerTemplate": {
                "size": spec.parallelism.nodes,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": _template(spec, owner, Role.LEADER, digest, npu_resource, driver_versions),
                "workerTemplate": _template(spec, owner, Role.WORKER, digest, npu_resource, driver_versions),
            },
        },
    }
