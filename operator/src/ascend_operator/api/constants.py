"""Names of the API and of the labels and annotations the operator puts on what it owns.

Kept in one module so the CRD generator, the renderer, the handlers and the tests agree on every string.
"""

GROUP = "inference.ascend.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "AscendInferenceService"
PLURAL = "ascendinferenceservices"
SINGULAR = "ascendinferenceservice"
SHORT_NAME = "ais"
CATEGORY = "ascend"

#: The extended resource the Ascend device plugin advertises for 910-series NPUs (mind-cluster
#: ascend-device-plugin registers `huawei.com/Ascend910` for 910/910B chips). The default of the operator's
#: `--npu-resource` (chart value operator.npuResource): Huawei Cloud CCE's plugin names it `huawei.com/ascend-1980`.
NPU_RESOURCE = "huawei.com/Ascend910"
#: NPU resource names of the device plugins in use; spec.resources may name none of them (spec.npus does).
KNOWN_NPU_RESOURCES = (NPU_RESOURCE, "huawei.com/ascend-1980")

LABEL_SERVICE = f"{GROUP}/service"
#: The label that selects a service's router pods. Not the engines' `inference.ascend.dev/service`: the
#: engine Service, its budget and the router's own discovery select on that one.
LABEL_ROUTER = f"{GROUP}/router"
#: The container names of an engine pod and a router pod: what `aissim attach` (the kubelet's stand-in)
#: finds in a pod to give it an engine or a router.
ENGINE_CONTAINER = "engine"
ROUTER_CONTAINER = "router"
LABEL_REPLICA = f"{GROUP}/replica"
#: The ControllerRevision hash a pod was rendered from (controller/revisions.py): status.revisions counts them.
LABEL_REVISION = f"{GROUP}/revision"
ANNOTATION_SPEC_HASH = f"{GROUP}/spec-hash"
#: The pod condition the operator sets from its health judgement (a readiness gate of every engine pod).
READINESS_GATE = f"{GROUP}/engine-ready"
MANAGED_BY = "ascend-inference-operator"

#: The Gateway API Inference Extension's InferencePool, v1 (sigs.k8s.io/gateway-api-inference-extension
#: v1.0.0, config/crd/bases/inference.networking.k8s.io_inferencepools.yaml: group, version v1, plural).
POOL_GROUP = "inference.networking.k8s.io"
POOL_VERSION = "v1"
POOL_API_VERSION = f"{POOL_GROUP}/{POOL_VERSION}"
POOL_KIND = "InferencePool"
POOL_PLURAL = "inferencepools"
POOL_CRD = f"{POOL_PLURAL}.{POOL_GROUP}"

#: The LeaderWorkerSet API a multi-node service becomes (sigs.k8s.io/lws v0.7.0, api/leaderworkerset/v1):
#: here, not in render/lws.py, because the clients address it too and clients import no render.
LWS_GROUP = "leaderworkerset.x-k8s.io"
LWS_VERSION = "v1"
LWS_API_VERSION = f"{LWS_GROUP}/{LWS_VERSION}"
LWS_KIND = "LeaderWorkerSet"
LWS_PLURAL = "leaderworkersets"
#: Labels LWS puts on every pod of a group (leaderworkerset_types.go:36-44).
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"

#: On an engine pod being drained before a planned deletion: JSON {"since": RFC 3339, "reason", "message"}.
#: On the pod, not in memory, so a restarted or failed-over operator continues the drain it finds.
ANNOTATION_DRAIN = f"{GROUP}/drain"
#: The pod's learned drift baseline (JSON {batch size: [step seconds, ...]}), so a restarted operator does
#: not learn an engine that is already slow as its baseline.
ANNOTATION_DRIFT_BASELINE = f"{GROUP}/drift-baseline"

#: The Ascend device plugin's node labels (ascend-device-plugin pkg/common/constants.go:362, :102; written by
#: server/manager.go:288-342): the NPU driver's version string and the chip's name.
DRIVER_VERSION_LABEL = "huawei.com/driver.version"
CHIP_NAME_LABEL = "node.kubernetes.io/npu.chip.name"
