"""The top-level spec of an AscendInferenceService: what to serve, on how many NPUs, and how.

Only single-field constraints live here; rules across fields are in `ascend_operator.validation.rules`,
which also carries their CEL twins for the CRD.
"""

from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field

from ascend_operator.api.autoscaling import AutoscalingSpec
from ascend_operator.api.base import ApiModel
from ascend_operator.api.disaggregation import DisaggregationSpec, PdRoleSpec
from ascend_operator.api.engine import EngineSpec
from ascend_operator.api.formats import ImageReference, LabelValue
from ascend_operator.api.health import HealthSpec
from ascend_operator.api.inference_pool import RoutingSpec
from ascend_operator.api.layout import EnvVar, Parallelism
from ascend_operator.api.rollout import RolloutSpec
from ascend_operator.api.router import RouterSpec
from ascend_operator.api.scheduling import VolcanoSpec
from ascend_operator.api.security import AuthSpec, NetworkPolicySpec

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: Docker's default capabilities that concern file access (see RuntimeSpec.capabilities).
ENGINE_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID")
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
QUANTITY = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$"
#: Bounded lengths keep the CEL rules that parse quantities inside the API server's cost budget.
Quantity = Annotated[str, Field(pattern=QUANTITY, max_length=32)]


class StagedModel(ApiModel):
    """A model the Ansible role model_stage put on nodes' local disks (playbooks/stage-model.yml), which
    labels each node `inference.ascend.dev/model-<name>=<the first 16 hex digits of its manifest's sha256>`."""

    name: str = Field(
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        max_length=40,
        description="The role's model_stage_name (the label's suffix).",
    )
    manifest_digest: str = Field(
        pattern=r"^[0-9a-f]{16}$",
        description="The first 16 hex digits of the manifest's sha256 the role printed and labelled: engines "
        "go only to nodes holding exactly that copy, and a Pending pod says when no node does.",
    )


class HostPathSource(ApiModel):
    """Model weights on a node-local directory (the seed's /data/models)."""

    path: str = Field(pattern=r"^/", min_length=2, description="Absolute directory on the node.")
    staged: StagedModel | None = Field(
        default=None, description="Schedule only onto nodes the model_stage role labelled as holding this model."
    )


class PvcSource(ApiModel):
    """Model weights on a PersistentVolumeClaim, mounted read-only."""

    claim_name: str = Field(pattern=DNS_LABEL, max_length=253, description="PVC in the service's namespace.")
    sub_path: str | None = Field(default=None, description="Directory inside the volume holding the model.")


class ModelSource(ApiModel):
    """Where the weights come from: exactly one of hostPath or pvc."""

    host_path: HostPathSource | None = Field(default=None, description="A node directory.")
    pvc: PvcSource | None = Field(default=None, description="A PersistentVolumeClaim.")


class ModelSpec(ApiModel):
    """The model to serve."""

    path: str = Field(
        pattern=r"^/",
        min_length=2,
        description="Model directory inside the container; the first `vllm serve` argument and the mount point.",
    )
    served_name: str = Field(
        pattern=r"^[A-Za-z0-9][-._A-Za-z0-9/]*$",
        max_length=253,
        description="The model name clients and the canary ask for.",
    )
    quantization: str | None = Field(default=None, description="Quantization method (`ascend` for W8A8).")
    profile: str | None = Field(
        default=None,
        description="Name of a model profile (memory figures measured on Atlas 800 A2) for the HBM/KV budget "
        "check; without one the check is skipped, never guessed.",
    )
    source: ModelSource = Field(description="Where the weights come from, mounted read-only.")


class RuntimeMode(StrEnum):
    """How the engine container reaches the NPU driver."""

    HOST_MOUNTS = "HostMounts"
    ASCEND_DOCKER_RUNTIME = "AscendDockerRuntime"


class RuntimeSpec(ApiModel):
    """Container runtime integration."""

    mode: RuntimeMode = Field(
        default=RuntimeMode.HOST_MOUNTS,
        description="HostMounts mounts the driver files vllm-ascend's container guide lists, for nodes whose "
        "container runtime is not the Ascend Docker Runtime: the device plugin then passes the /dev/davinci* "
        "devices to the kubelet itself. AscendDockerRuntime relies on the Ascend Docker Runtime to inject "
        "devices and driver files. The plugin picks its mode from its own environment (`ASCEND_DOCKER_RUNTIME="
        "True`, written by that runtime; ascend-device-plugin main.go), not from its `-useAscendDocker` flag, "
        "which MindCluster 5.0.RC1 and later ignore: the node's runtime decides (docs/deploy.md).",
    )
    shm_size: str = Field(
        default="64Gi",
        pattern=QUANTITY,
        max_length=32,
        description="Size of the memory-backed /dev/shm (engine workers exchange tensors through it).",
    )
    read_only_root_filesystem: bool = Field(
        default=False,
        description="Mount the engine's root filesystem read-only, with emptyDirs on the paths vLLM and "
        "vllm-ascend write (/tmp, ~/.cache, ~/.triton, ~/ascend, the /workspace workdir). Off by default: "
        "CANN writes outside these paths is not verified without an NPU.",
    )
    capabilities: list[Annotated[str, Field(pattern=r"^[A-Z_]+$")]] = Field(
        default_factory=lambda: list(ENGINE_CAPABILITIES),
        description="Linux capabilities the engine keeps; all others are dropped. The default keeps the "
        "file-permission ones of Docker's default set (vllm-ascend's container guide runs `docker run` "
        "without --privileged or --cap-add), for a root process reading driver files it does not own; "
        "NET_RAW, MKNOD, SETUID, SETGID, KILL and the rest go. [] drops all (not verified on an NPU).",
    )
    min_driver_version: str | None = Field(
        default=None,
        pattern=r"^[0-9]+\.[0-9]+((\.([rR][cC])?[0-9]+){1,2}(\.[bB][0-9]+)?)?$",
        max_length=32,
        description="Place engines only on nodes whose NPU driver is at least this version, as the Ascend "
        "device plugin labels it (`huawei.com/driver.version`, e.g. 24.1.rc2, 26.0.RC1, 24.1.rc3.b060 or "
        "25.5.1; an rc is older than its release, a build bNNN newer than the same version without one). The "
        "scheduler cannot compare versions, so the operator (with `--npu-faults`, which reads the nodes) renders "
        "the versions present in the cluster that meet it; a Pending pod's status "
        "says when no node does (docs/npu-faults.md).",
    )
    chip_name: LabelValue | None = Field(
        default=None,
        description="Place engines only on nodes with this NPU, as the device plugin labels it "
        "(`node.kubernetes.io/npu.chip.name`, e.g. 910B3).",
    )


class Resources(ApiModel):
    """CPU and memory for the engine container; NPUs come from `spec.npus`, not from here.

    Unset keys are defaulted from the Atlas 800 A2 node profile (`ascend_operator.render.resources`), so
    an engine pod is never BestEffort, the first class the kubelet evicts under memory pressure.
    """

    requests: dict[str, Quantity] = Field(
        default_factory=dict,
        max_length=16,
        description="Resource requests (cpu, memory). Unset: cpu 48 (a quarter of an Atlas 800 A2's 192 "
        "cores, for the API server, tokenizer and one busy engine process per NPU) and memory 256Gi plus "
        "runtime.shmSize (the memory-backed /dev/shm is charged to the container's memory), 320Gi by default, "
        "which fits the 502Gi a KWOK Atlas node advertises and the ~1.5 TB of a real one.",
    )
    limits: dict[str, Quantity] = Field(
        default_factory=dict,
        max_length=16,
        description="Resource limits. Unset memory: the memory request (memory cannot be throttled, so a "
        "limit above the request only moves the OOM kill). Unset cpu: no limit (throttling a decode loop "
        "costs latency). The memory limit must exceed runtime.shmSize: /dev/shm counts against it.",
    )


class PodMetadata(ApiModel):
    """Labels and annotations added to every engine pod."""

    labels: dict[str, LabelValue] = Field(
        default_factory=dict,
        max_length=64,
        description="Extra pod labels; keys under inference.ascend.dev/ and app.kubernetes.io/ are the "
        "operator's (selectors depend on them) and may not be set.",
    )
    annotations: dict[str, str] = Field(default_factory=dict, description="Extra pod annotations.")


class LocalObjectReference(ApiModel):
    """A reference to an object in the service's namespace, by name."""

    name: str = Field(pattern=DNS_SUBDOMAIN, max_length=253, description="Object name.")


class ServiceType(StrEnum):
    """Kubernetes Service types the engine Service may have."""

    CLUSTER_IP = "ClusterIP"
    NODE_PORT = "NodePort"
    LOAD_BALANCER = "LoadBalancer"


class ServiceSpec(ApiModel):
    """The Service in front of the ready engine pods."""

    type: ServiceType = Field(default=ServiceType.CLUSTER_IP, description="Service type.")
    annotations: dict[str, str] = Field(
        default_factory=dict, description="Service annotations (e.g. for a cloud load balancer)."
    )


class DisruptionBudget(ApiModel):
    """The PodDisruptionBudget over the engine pods, so `kubectl drain` keeps one replica serving."""

    enabled: bool = Field(default=True, description="Create a PodDisruptionBudget for the service.")
    min_available: int = Field(
        default=1,
        ge=0,
        le=128,
        description="Ready engine pods an eviction (kubectl drain, cluster autoscaler) must leave; 1 keeps "
        "the last serving replica. For a multi-node service it counts replicas (whole groups): one evicted "
        "member recreates its group, so the budget leaves minAvailable groups' pods. Pods that are not Ready "
        "can always be evicted (unhealthyPodEvictionPolicy AlwaysAllow), so a broken replica never blocks a "
        "drain. The operator's own deletions go through spec.rollout (budget, drain) and spec.health.rolls "
        "(health roll limits) instead.",
    )


class Scheduling(ApiModel):
    """Where pods may run."""

    node_selector: dict[str, LabelValue] = Field(default_factory=dict, max_length=64, description="Pod nodeSelector.")
    tolerations: list[dict[str, Any]] = Field(default_factory=list, description="Pod tolerations.")
    affinity: dict[str, Any] | None = Field(default=None, description="Pod affinity, as Kubernetes takes it.")
    scheduler_name: str | None = Field(
        default=None,
        pattern=DNS_SUBDOMAIN,
        max_length=253,
        description="The scheduler that binds engine and router pods (`volcano` on a MindCluster cluster "
        "that schedules NPUs with Volcano; docs/deploy.md). Unset: the cluster's default scheduler. A "
        "multi-node group is gang-scheduled (all of its pods or none) only when LeaderWorkerSet's manager "
        "runs with Volcano as its gang-scheduling provider.",
    )
    volcano: VolcanoSpec | None = Field(
        default=None, description="Volcano's queue for the service's pods (needs schedulerName)."
    )


class AscendInferenceServiceSpec(ApiModel):
    """Desired state of an AscendInferenceService."""

    replicas: int = Field(
        default=1, ge=0, le=128, description="Engine replicas; each takes `parallelism.nodes` pods of `npus` NPUs."
    )
    autoscaling: AutoscalingSpec | None = Field(
        default=None,
        description="Let the operator set spec.replicas from the engines' queue, KV usage and TTFT "
        "(docs/autoscaling.md). Unset: spec.replicas is the user's, or an HPA's through the scale subresource.",
    )
    image: ImageReference = Field(description="Engine image (vllm-ascend with the model's custom ops).")
    image_pull_policy: str = Field(
        default="IfNotPresent", pattern=r"^(Always|IfNotPresent|Never)$", description="Image pull policy."
    )
    npus: int = Field(default=8, ge=1, le=16, description="NPUs per pod, so per node (`huawei.com/Ascend910`).")
    model: ModelSpec = Field(description="The model to serve.")
    parallelism: Parallelism = Field(default_factory=Parallelism, description="TP / DP / EP layout.")
    engine: EngineSpec = Field(default_factory=EngineSpec, description="vLLM engine settings.")
    env: list[EnvVar] = Field(default_factory=list, description="Environment overrides by name.")
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec, description="Container runtime integration.")
    resources: Resources = Field(default_factory=Resources, description="CPU and memory.")
    scheduling: Scheduling = Field(default_factory=Scheduling, description="Node placement.")
    health: HealthSpec = Field(default_factory=HealthSpec, description="Canary, stall and drift detection, rolls.")
    rollout: RolloutSpec = Field(
        default_factory=RolloutSpec, description="Disruption budget and drain of the operator's own deletions."
    )
    routing: RoutingSpec = Field(default_factory=RoutingSpec, description="InferencePool for GIE gateways.")
    router: RouterSpec | None = Field(
        default=None,
        description="A vllm-router Deployment of the service's own in front of its engines, with its Service "
        "(`<name>-router`) for clients; it discovers only engine pods the operator judged Ready, and admits "
        "at most the engines' slots at once (docs/router.md). Absent: clients use the engine Service.",
    )
    disaggregation: DisaggregationSpec | None = Field(
        default=None,
        description="Split the service into a prefill and a decode service (`<name>-prefill`, `<name>-decode`) "
        "that move the KV cache with vllm-ascend's Mooncake connector, behind spec.router in P/D mode. "
        "spec.replicas then counts units of prefill.replicas + decode.replicas engines (docs/disaggregation.md).",
    )
    pd_role: PdRoleSpec | None = Field(
        default=None,
        description="Set by the operator on the services spec.disaggregation creates: which role of which "
        "disaggregated service this one is; renders `--kv-transfer-config`.",
    )
    auth: AuthSpec = Field(default_factory=AuthSpec, description="The engine's API key.")
    network_policy: NetworkPolicySpec = Field(
        default_factory=NetworkPolicySpec, description="Who may reach the engine port."
    )
    image_pull_secrets: list[LocalObjectReference] = Field(
        default_factory=list, description="Secrets for pulling the engine image from a private registry."
    )
    service_account_name: str | None = Field(
        default=None,
        pattern=DNS_SUBDOMAIN,
        max_length=253,
        description="ServiceAccount of the engine pods. Unset: the namespace's default.",
    )
    priority_class_name: str | None = Field(
        default=None,
        pattern=DNS_SUBDOMAIN,
        max_length=253,
        description="PriorityClass of the engine pods (an 8-NPU engine is costly to preempt and reload) "
        "and of the router's.",
    )
    pod_metadata: PodMetadata = Field(default_factory=PodMetadata, description="Extra engine pod metadata.")
    service: ServiceSpec = Field(default_factory=ServiceSpec, description="The engine Service.")
    disruption_budget: DisruptionBudget = Field(
        default_factory=DisruptionBudget, description="The PodDisruptionBudget of the engine pods."
    )
