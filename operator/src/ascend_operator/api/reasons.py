"""Every reason the operator writes: why it deleted a pod and how it left, the reasons of its status
conditions and of its events, one enum per meaning, each member saying when it is set and what a user
does about it. In the API because users read them (docs/api.md lists them from these enums).

Why here and not beside the decision that uses it: `status.rolls[].reason` is part of the API, so the CRD's
schema enumerates these values (a reason outside the list is refused by the API server, and a user can see
every possible value with `kubectl explain`). What the decision does with each reason is its row in
`ascend_operator.disruption.model.KINDS`, which imports this enum (tests/disruption/test_one_place.py:
every member has a row). A condition's or an event's reason is typed with these enums where it is written
(or `Relayed`, when the words are another component's), so mypy refuses a string outside the lists, and
tests/unit/test_reasons.py fails on a reason literal that is no member or a member docs/api.md lacks.
"""

from enum import StrEnum
from typing import NewType


class RollReason(StrEnum):
    """Why a pod is deleted (status.rolls, events and the `ascend_operator_rolls_total{reason}` series). Each
    member is one kind of deletion; what the decision does with it is its row in disruption/model.py."""

    STALLED = "Stalled"
    DRIFT = "ThroughputDrift"
    MAX_AGE = "MaxAge"
    SPEC_CHANGED = "SpecChanged"
    SCALE_DOWN = "ScaleDown"
    DUPLICATE = "Duplicate"
    TOPOLOGY_CHANGED = "TopologyChanged"
    NPU_FAULT = "NPUFault"
    NPU_PRE_SEPARATE = "NPUPreSeparate"
    NODE_UNHEALTHY = "NodeUnhealthy"
    GROUP_RECREATED = "GroupRecreated"
    NODE_LOST = "NodeLost"
    ROLLED_BACK = "RolledBack"


class DrainResult(StrEnum):
    """How the pod left (status.rolls[].drain; empty on records written before drains were recorded)."""

    COMPLETED = "Completed"
    """Its running and waiting requests reached 0 after the gate went False."""
    TIMED_OUT = "TimedOut"
    """spec.rollout.drainSeconds passed with requests still in flight."""
    NOT_DRAINED = "NotDrained"
    """It served nobody (not Ready: stalled, crashed, loading) or stopped answering while draining."""


Relayed = NewType("Relayed", str)
"""A reason the operator repeats rather than chooses: the kubelet's waiting reason of a container, a
validation rule's name, a P/D role's own Ready reason, or a condition read back from the stored status
(typed when it was first written). Wrapping a string in it is the explicit statement that the words are
someone else's; a bare string literal where a reason goes is a type error (mypy --strict)."""


class ReplicaReason(StrEnum):
    """Why one replica does not serve, said by the operator itself (controller/causes.py). The most
    serious cause over the replicas is the reason of Ready and Available; a cause that is a fault (all
    but Draining and WaitingForReplicas) is also Degraded's. The message names the pod."""

    POD_CREATE_FAILED = "PodCreateFailed"
    """The API server refused to create the pod (ResourceQuota, an admission webhook, Pod Security); the
    message is the server's. Fix what it names; the operator retries every pass."""
    FAILED_MOUNT = "FailedMount"
    """A volume of the pod does not mount (the kubelet's FailedMount event, its message): check the PVC,
    Secret or host path it names."""
    INSUFFICIENT_NPU = "InsufficientNPU"
    """No node has the free NPUs the pod asks for (the scheduler's message): free or add NPUs, or ask for
    fewer (spec.parallelism)."""
    UNSCHEDULABLE = "Unschedulable"
    """The scheduler cannot place the pod for another reason (taints, node selector, affinity: its
    message says which)."""
    DRAINING = "Draining"
    """The pod is being deleted, or is out of the Service waiting for its requests to end before a planned
    deletion (spec.rollout.drainSeconds). Nothing to do: a successor follows."""
    WAITING_FOR_REPLICAS = "WaitingForReplicas"
    """The pod exists and nothing is wrong yet: it is starting, loading the model, or not judged yet (the
    message says which). Wait; spec.health.startupGraceSeconds bounds how long."""


class KubeletReason(StrEnum):
    """Container waiting reasons the kubelet reports that the status repeats as a replica's cause, most
    serious first (kubelet: pkg/kubelet/images/types.go, pkg/kubelet/container/sync_result.go). Any other
    waiting reason is repeated as well, ranked after these."""

    CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
    """The engine exits and the kubelet restarts it with back-off; the message has the restart count and
    the last exit. Read the container's log (`kubectl logs --previous`)."""
    IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
    """The image cannot be pulled and the kubelet waits to retry: check spec.image and the pull secret."""
    ERR_IMAGE_PULL = "ErrImagePull"
    """The last pull of the image failed: check spec.image, the registry and the pull secret."""
    INVALID_IMAGE_NAME = "InvalidImageName"
    """spec.image is not a valid image reference."""
    ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
    """The pull policy is Never and the node lacks the image: load it on the node or change the policy."""
    CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
    """The container's configuration cannot be built (a missing Secret or ConfigMap key it references)."""
    CREATE_CONTAINER_ERROR = "CreateContainerError"
    """The runtime failed to create the container (the message is the runtime's)."""
    RUN_CONTAINER_ERROR = "RunContainerError"
    """The runtime failed to start the container (the message is the runtime's)."""


class VerdictReason(StrEnum):
    """The health judge's verdict on a pod (health/judge.py `CHAIN`, in order): the reason of the pod's
    readiness gate, and for a fault also the replica's cause in Ready, Available and Degraded. The
    message carries the evidence."""

    NODE_UNHEALTHY = RollReason.NODE_UNHEALTHY.value
    """The device plugin reports the pod's node unhealthy (docs/npu-faults.md): the pod is recreated
    elsewhere. Check the node."""
    NPU_FAULT = RollReason.NPU_FAULT.value
    """The device plugin reports a fault on one of the pod's NPUs that breaks the work on it: the pod is
    recreated. Check the chip (docs/npu-faults.md)."""
    WORKER_GONE = "WorkerGone"
    """A worker pod of the multi-node group is gone or not running: the group is recreated."""
    CONFIG_MISMATCH = "ConfigMismatch"
    """The engine's effective configuration differs from the spec (the message lists what): a fault, not
    rolled (a new pod would be the same); fix the image or the spec."""
    ENGINE_NOT_ANSWERING = "EngineNotAnswering"
    """The engine does not answer its /metrics: out of the Service until it does."""
    STALLED = RollReason.STALLED.value
    """The engine holds requests but makes no progress (health/stall.py): the pod is recreated, within
    spec.health.rolls."""
    CHECKING_CONFIG = "CheckingConfig"
    """The effective configuration has not been checked yet: a pod that served keeps its gate meanwhile."""
    CANARY_FAILING = "CanaryFailing"
    """spec.health.canary.failureThreshold canaries in a row returned no tokens and the engine made no
    progress: out of the Service until one passes."""
    AWAITING_CANARY = "AwaitingCanary"
    """No canary has passed yet since the pod started (or the last one failed): wait."""
    NPU_PRE_SEPARATE = RollReason.NPU_PRE_SEPARATE.value
    """The device plugin asks to move work off one of the pod's NPUs: the pod serves on and is drained and
    recreated."""
    THROUGHPUT_DRIFT = RollReason.DRIFT.value
    """The engine is slower than its own learned baseline (health/drift.py): it serves on and is
    recreated within spec.health.rolls."""
    CANARY_PASSING = "CanaryPassing"
    """Tokens come back and the engine advances: the pod serves."""
    DRAINING = "Draining"
    """The pod is out of the Service before a planned deletion, waiting for its requests to end."""


class DetectorFinding(StrEnum):
    """What one detector found on one pod (health/stall.py, health/drift.py), before the judge's chain turns
    the findings into the pod's verdict (VerdictReason, which is what the gate and the status show). Listed
    so that every reason the operator spells is in one catalogue; they reach the operator's log."""

    INSUFFICIENT_DATA = "InsufficientData"
    """Too few scrapes (stall) or comparable windows (drift) to judge yet: nothing is concluded."""
    IDLE = "Idle"
    """Stall: nothing runs and nothing waits, so nothing has to move."""
    PROGRESSING = "Progressing"
    """Stall: a counter of forward progress moved within the stall window (or a policy explains the wait)."""
    STALLED = RollReason.STALLED.value
    """Stall: requests run or wait and no progress counter moved for the stall window (the verdict Stalled)."""
    DISABLED = "Disabled"
    """Drift: spec.health.drift.enabled is false."""
    WITHIN_BASELINE = "WithinBaseline"
    """Drift: the engine's step times at each batch size are within the threshold of its own baseline."""
    SERVICE_WIDE = "ServiceWide"
    """Drift: the pod's steps are slower than its baseline, but its service peers' steps, measured against
    the same baseline at the same moment, are as slow: the workload or the platform changed, not this
    engine, and rolling it would not help."""
    PEERS_LEARNING = "PeersLearning"
    """Drift: the pod's peers are all still learning (not Ready yet, or Ready for less than the drift
    warm-up plus its baseline windows: just replaced) and none has a comparable window: alone, a pod cannot
    tell its own slowness from the host's, so it is not judged until one has. An idle peer Ready for longer
    holds nothing back: the pod is then judged on its own baseline."""
    THROUGHPUT_DRIFT = RollReason.DRIFT.value
    """Drift: steps take longer than the pod's baseline by more than the threshold, sustained, and longer
    than its peers' by the threshold too (the verdict ThroughputDrift)."""


class ReadyReason(StrEnum):
    """The Ready condition's own reasons (every desired replica serves). While not Ready for a cause a
    replica shows, the reason is that cause (a `ReplicaReason`, `VerdictReason` or kubelet reason)."""

    INVALID_SPEC = "InvalidSpec"
    """The spec fails validation and no replica serves: the message lists each field and rule. Fix the spec."""
    SCALED_TO_ZERO = "ScaledToZero"
    """spec.replicas is 0 (True: nothing is asked for)."""
    ALL_REPLICAS_READY = "AllReplicasReady"
    """Every desired replica serves."""
    SERVING_PREVIOUS_SPEC = "ServingPreviousSpec"
    """Every replica serves, on the last valid spec: the current one is invalid (see Degraded)."""
    ALL_ROLES_READY = "AllRolesReady"
    """A disaggregated service: both the prefill and the decode role are Ready."""


class AvailableReason(StrEnum):
    """The Available condition's own reasons (at least one replica serves); False for a cause a replica
    shows takes that cause as its reason."""

    REPLICAS_SERVING = "ReplicasServing"
    """At least one replica serves (the message counts them)."""
    SERVING_PREVIOUS_SPEC = "ServingPreviousSpec"
    """Replicas serve on the last valid spec while the current one is invalid."""
    INVALID_SPEC = "InvalidSpec"
    """The spec fails validation and no replica serves. Fix the spec."""
    SCALED_TO_ZERO = "ScaledToZero"
    """spec.replicas is 0: nothing serves, by request."""
    ROLES_SERVING = "RolesServing"
    """A disaggregated service: each role has an engine serving, so a request can be served."""
    ROLE_UNAVAILABLE = "RoleUnavailable"
    """A disaggregated service: one role has no engine serving (the message names it); see that role's
    own service."""


class ProgressingReason(StrEnum):
    """The Progressing condition's reasons (True while the replicas move toward the spec)."""

    INVALID_SPEC = "InvalidSpec"
    """False: the current spec is invalid, so nothing is rolled to it."""
    ROLLING_UPDATE = "RollingUpdate"
    """Replicas still run an older spec and are being replaced through the disruption budget."""
    SCALING_REPLICAS = "ScalingReplicas"
    """The number of pods differs from spec.replicas, or pods are being deleted."""
    WAITING_FOR_REPLICAS = "WaitingForReplicas"
    """Every pod runs the current spec; some are not Ready yet (Ready's reason says why)."""
    REPLICAS_UP_TO_DATE = "ReplicasUpToDate"
    """False: every replica runs the current spec and is Ready."""
    TOPOLOGY_SWITCH_WAITING = "TopologySwitchWaiting"
    """A switch between one node and several per replica waits for capacity (the message says what the
    other shape needs)."""
    ROLES_UP_TO_DATE = "RolesUpToDate"
    """False, a disaggregated service: both roles run the current spec and are ready."""
    ROLES_PROGRESSING = "RolesProgressing"
    """A disaggregated service: a role is still moving (the message quotes it)."""


class DegradedReason(StrEnum):
    """The Degraded condition's own reasons; True for a fault a replica shows (a `ReplicaReason` other
    than Draining and WaitingForReplicas, a fault `VerdictReason`, a kubelet reason) takes that fault."""

    INVALID_SPEC = "InvalidSpec"
    """The current spec fails validation (replicas may serve the previous one): fix the spec."""
    AS_EXPECTED = "AsExpected"
    """False: nothing is wrong."""
    ROLL_DEFERRED = "RollDeferred"
    """A health roll the disruption rules refused (rate limit, cooldown, budget): the message says what was
    found on which pod and which rule holds it. It happens once the rule allows."""
    ROLE_DEGRADED = "RoleDegraded"
    """A disaggregated service: a role is Degraded without a reason of its own (see its service)."""


class PoolReason(StrEnum):
    """The InferencePoolReady condition's reasons (spec.routing.inferencePool), each also an event."""

    SYNCED = "Synced"
    """True: the InferencePool selects the engines as the spec asks (the message says which gateways
    accepted it)."""
    CRD_NOT_INSTALLED = "CRDNotInstalled"
    """The API server does not serve the InferencePool v1 CRD: install the Gateway API Inference Extension
    CRDs. The engines serve on through their Service."""
    FORBIDDEN = "Forbidden"
    """The operator may not manage InferencePools: install the chart with routing.inferencePool.enabled=true."""
    REJECTED = "Rejected"
    """The API server rejected the pool (its message)."""
    RETRYING = "Retrying"
    """Unknown: the API server did not answer; retried on the next pass."""
    NOT_OWNED = "NotOwned"
    """An InferencePool of that name exists that this service does not own: delete or rename one."""


class AutoscalingReason(StrEnum):
    """The Autoscaling condition's reason while the autoscaler acts; while it holds, False with the hold's
    `ScaleReason` (OtherAutoscaler, NoCapacity, NoSignal, NotReady)."""

    FOLLOWING_LOAD = "FollowingLoad"
    """True: spec.replicas follows the engines' load within spec.autoscaling's bounds."""


class EventReason(StrEnum):
    """Reasons of the events the operator posts about a service that are no condition's or deletion's
    (those are posted too: a deletion's `RollReason`, an autoscaler's `ScaleReason`, Degraded or Ready
    turning True, InferencePoolReady changing, a validation rule's name for an invalid spec, and the
    ConfigMismatch verdict)."""

    POD_CREATED = "PodCreated"
    """A replica's pod was created (the message has its spec digest)."""
    POD_CREATE_FAILED = "PodCreateFailed"
    """Warning: the API server refused a pod (quota, admission): once per distinct message."""
    GROUPS_CREATED = "GroupsCreated"
    """A multi-node service's LeaderWorkerSet was created."""
    GROUPS_UPDATED = "GroupsUpdated"
    """The LeaderWorkerSet was patched to the current spec or group count."""
    NETWORK_POLICY_FAILED = "NetworkPolicyFailed"
    """Warning: the service's NetworkPolicy could not be made, so the pods this pass created were deleted
    (no pod runs unprotected): check the operator's RBAC and the API server's message."""
    DISRUPTION_BUDGET_CREATED = "DisruptionBudgetCreated"
    """The engines' PodDisruptionBudget was created."""
    DISRUPTION_BUDGET_REMOVED = "DisruptionBudgetRemoved"
    """The engines' PodDisruptionBudget was deleted."""
    ROUTER_CREATED = "RouterCreated"
    """spec.router's Deployment was created."""
    ROUTER_REMOVED = "RouterRemoved"
    """spec.router was removed and its Deployment deleted."""
    ROUTER_FORBIDDEN = "RouterForbidden"
    """Warning: the operator may not manage the router's objects: install the chart with router.enabled=true.
    The engines serve on through their own Service."""
    ROLE_CREATED = "RoleCreated"
    """A disaggregated service's prefill or decode service was created."""
    ROLE_REMOVED = "RoleRemoved"
    """A role's service was deleted (spec.disaggregation removed)."""
    CHIP_REPORT_UNREADABLE = "ChipReportUnreadable"
    """Warning: the device plugin's report of a node cannot be read (once per problem): NPU faults there go
    unseen until it can. Check the device plugin."""
    API_KEY_UNAVAILABLE = "ApiKeyUnavailable"
    """Warning: the API key Secret (spec.auth.apiKeySecretRef) cannot be read: the canary and the config
    check go without it and may be refused by the engine. Check the Secret and the operator's RBAC."""
    ANALYSIS_PASSED = "AnalysisPassed"
    """The judged replica of a new revision passed spec.rollout.analysis: the rest follow."""
    ROLLOUT_COMPLETE = "RolloutComplete"
    """Every replica runs the new revision."""
    ROLL_COMPLETED = "RollCompleted"
    """A deletion recorded before an operator restart was carried out after it."""
    DRAINING = "Draining"
    """A pod left the Service to finish its requests before its deletion (the message has the deletion's
    reason)."""
    ROLLED = "Rolled"
    """Warning: a pod is recreated for a health reason (the message has the evidence)."""
    ENGINE_RESTARTED = "EngineRestarted"
    """Warning: the kubelet restarted a pod's engine container (it exited: the message has how). The pod is
    not rolled: its readiness, samples, canary and config check start over, as for a new engine, and the
    kubelet's own back-off applies. Check the engine's previous log (`kubectl logs --previous`)."""


class RolloutSignal(StrEnum):
    """What decided a judged rollout (status.rollout.signal; spec.rollout.analysis): a check of the new
    replica against the previous ones, in the order they are asked (rollout_analysis `CHECKS`). A judged
    pod that went before the verdict is the `RollReason` of its deletion, or the `VerdictReason` of its
    fault. Each check but TooLittleTraffic rolls back; the thresholds are spec.rollout.analysis.thresholds."""

    CANARY_FAILURES = "CanaryFailures"
    """More generation canaries failed on the new replica than thresholds.canaryFailures: it does not
    work, whatever the traffic. Read its engine's log."""
    ERRORS = "Errors"
    """The new replica ended more of its requests in an engine error (a 500) than the previous ones, by
    more than thresholds.errorRate."""
    TOO_LITTLE_TRAFFIC = "TooLittleTraffic"
    """Either side started fewer than thresholds.minRequests requests per replica: the window is extended,
    never rolled back. Send traffic, or lower minRequests."""
    TTFT = "TTFT"
    """TTFT p90 of the new replica above thresholds.ttftP90Ratio times the previous replicas': it queues or
    prefills slower."""
    TPOT = "TPOT"
    """TPOT p90 of the new replica above thresholds.tpotP90Ratio times the previous replicas': it decodes
    slower per token."""
    TOKENS_PER_REQUEST = "TokensPerRequest"
    """Output tokens/s per running request below thresholds.tokensPerRequestRatio of the previous replicas':
    it serves each user slower."""
    QUEUE = "Queue"
    """More requests wait on the new replica than on a previous one, by more than thresholds.waitingPerReplica:
    it holds fewer at once."""
    CANARY_GONE = "CanaryGone"
    """The judged pod went before the verdict and no deletion of the operator's took it (deleted by hand, or
    its node went): rolled back, the previous revision kept."""
