"""The status of an AscendInferenceService, as the operator writes it.

Conditions follow the Kubernetes convention (type, status, reason in CamelCase, message,
lastTransitionTime, observedGeneration), so `kubectl wait --for=condition=Ready` (every desired replica serves) and
`--for=condition=Available` (at least one serves) work on a service.
"""

from pydantic import Field, field_validator

from ascend_operator.api.autoscaling import AutoscalingStatus, ScaleReason
from ascend_operator.api.base import ApiModel
from ascend_operator.api.reasons import (
    AutoscalingReason,
    AvailableReason,
    DegradedReason,
    DrainResult,
    EventReason,
    KubeletReason,
    PoolReason,
    ProgressingReason,
    ReadyReason,
    Relayed,
    ReplicaReason,
    RollReason,
    VerdictReason,
)
from ascend_operator.api.revision import RevisionCount, RolloutPhase, RolloutStatus

READY = "Ready"
AVAILABLE = "Available"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
#: Present only while spec.routing.inferencePool is (or was just) enabled: whether the owned pool is in sync.
INFERENCE_POOL_READY = "InferencePoolReady"
#: Present with spec.autoscaling: True while the autoscaler decides spec.replicas, False while it holds.
AUTOSCALING = "Autoscaling"
#: How the last spec change went (spec.rollout): True while it goes on or is done, False when rolled back.
ROLLOUT_HEALTHY = "RolloutHealthy"


class Condition(ApiModel):
    """One status condition."""

    type: str = Field(
        description="Ready, Available, Progressing, Degraded, InferencePoolReady when routing is on, Autoscaling "
        "with spec.autoscaling (False while it holds: another autoscaler, no NPUs, no signal)."
    )
    status: str = Field(pattern=r"^(True|False|Unknown)$", description="True, False or Unknown.")
    reason: str = Field(pattern=r"^[A-Z][A-Za-z0-9]*$", description="CamelCase reason.")
    message: str = Field(default="", description="Human-readable detail.")
    last_transition_time: str | None = Field(default=None, description="When status last changed (RFC 3339).")
    observed_generation: int | None = Field(default=None, description="The generation this was computed for.")


class EngineMetrics(ApiModel):
    """Engine figures summed or averaged over the service's pods, from their /metrics."""

    tokens_per_second: float | None = Field(default=None, description="Generated tokens per second.")
    kv_cache_usage: float | None = Field(default=None, description="Highest KV cache usage (0..1) of a pod.")
    running_requests: int | None = Field(default=None, description="Requests running.")
    waiting_requests: int | None = Field(default=None, description="Requests waiting for a slot.")
    ttft_p50_seconds: float | None = Field(default=None, description="Engine TTFT p50 over the last 30 s.")
    tpot_p50_seconds: float | None = Field(default=None, description="Engine time per output token p50.")
    acceptance_length: float | None = Field(default=None, description="Speculative acceptance length.")
    acceptance_per_position: list[float] | None = Field(
        default=None, description="Accepted share per draft position (single pod)."
    )
    preemptions: int | None = Field(default=None, description="Preemptions over the last 30 s.")


class LiveStatus(ApiModel):
    """The status fields the health loop refreshes at scrape rate: the engine figures and the autoscaler's
    decision, written with the next status patch (at most every status interval when nothing else changed).
    Each is the status's own field (same name and type: tests/controller/test_status_schema.py), so the reconcile
    loop lays it over the status it computes. A field left unset is not written; one set to None clears
    the stored one (the engines stopped answering)."""

    metrics: EngineMetrics | None = Field(default=None, description="Engine figures.")
    tokens_per_second_display: str | None = Field(default=None, description="Tokens/s for the printer column.")
    kv_cache_usage_display: str | None = Field(default=None, description="KV usage for the printer column.")
    autoscaling: AutoscalingStatus | None = Field(default=None, description="spec.autoscaling's last decision.")


class Roll(ApiModel):
    """One pod the operator deleted, and why; written before the delete, so a crash in between loses nothing."""

    time: str = Field(description="When (RFC 3339).")
    pod: str = Field(description="The pod that was recreated.")
    uid: str = Field(default="", description="The uid of the deleted pod (a successor of the same name has another).")
    reason: RollReason = Field(
        description="Why the pod went: a health verdict, the spec, an NPU fault report, or a group the "
        "LeaderWorkerSet recreated on its own; docs/disruption.md says what each kind does."
    )
    message: str = Field(default="", description="The detector's finding and evidence.")
    drain: DrainResult | None = Field(
        default=None,
        description="Completed (its requests reached 0), TimedOut (spec.rollout.drainSeconds passed) or NotDrained "
        "(it served nobody: stalled, crashed, loading).",
    )

    @field_validator("drain", mode="before")
    @classmethod
    def _unrecorded(cls, value: object) -> object:
        """A record kept from before drains were recorded says "": nothing known, as null."""
        return None if value == "" else value


class GroupStatus(ApiModel):
    """One multi-node group (a LeaderWorkerSet replica) as its pods show it."""

    index: int = Field(description="LWS group index (the replica).")
    leader: str = Field(default="", description="The leader pod, which serves and is judged.")
    ready: bool = Field(default=False, description="The leader is Ready (canary, config check, no stall).")
    pods: str = Field(default="", description="Pods of the group that exist, of spec.parallelism.nodes.")
    nodes: list[str] = Field(default_factory=list, description="Nodes the group's pods run on, leader first.")


class RouterStatus(ApiModel):
    """The service's router (spec.router) and the admission it renders (docs/router.md "Admission")."""

    service: str = Field(description="The router's Service, the one clients call.")
    replicas: int = Field(default=0, description="Router pods the spec asks for.")
    ready_replicas: int = Field(default=0, description="Router pods Ready (each has a Ready engine to route to).")
    max_concurrent_requests: int = Field(
        default=0, description="Requests all router replicas admit at once (each replica's --max-concurrent-requests)."
    )
    queue_size: int = Field(default=0, description="Requests all replicas hold waiting for a slot; beyond: 429.")
    queue_timeout_seconds: int = Field(default=0, description="A queued request gets 408 after this long.")
    engine_slots: int = Field(default=0, description="Sequences the engines run at once (replicas x DP x maxNumSeqs).")


class RoleStatus(ApiModel):
    """One role of a disaggregated service, as its own service's status shows it."""

    role: str = Field(description="prefill or decode.")
    service: str = Field(description="The role's AscendInferenceService (`<name>-prefill`, `<name>-decode`).")
    desired_replicas: int = Field(default=0, description="Engines of this role the spec asks for.")
    ready_replicas: int = Field(default=0, description="Engines of this role that are Ready.")
    ready: bool = Field(default=False, description="The role's Ready condition is True.")
    reason: str = Field(default="", description="The reason of the role's Ready condition.")
    message: str = Field(default="", description="Its message.")
    autoscaling: AutoscalingStatus | None = Field(
        default=None,
        description="With spec.autoscaling: this pool's decision (its own signals, then the parent's "
        "decode-per-prefill ratio; RatioBound when the ratio moved or held it).",
    )


class AscendInferenceServiceStatus(ApiModel):
    """Observed state."""

    observed_generation: int | None = Field(default=None, description="Last spec generation acted on.")
    replicas: int = Field(default=0, description="Engine pods that exist.")
    ready_replicas: int = Field(default=0, description="Engine pods that are Ready.")
    desired_replicas: int = Field(default=0, description="spec.replicas.")
    updated_replicas: int = Field(default=0, description="Engine pods that run the current spec.")
    selector: str | None = Field(
        default=None,
        description="Label selector of the pods an autoscaler counts, one per replica (the scale subresource's, "
        "for HPA and KEDA): every engine pod, or each group's leader for a multi-node service.",
    )
    restarts: int = Field(default=0, description="Container restarts summed over the engine pods.")
    spec_hash: str | None = Field(default=None, description="Digest of the pod spec the current spec renders.")
    endpoint: str | None = Field(default=None, description="In-cluster URL of the service's OpenAI API.")
    tokens_per_second_display: str | None = Field(
        default=None, description="Tokens/s for the printer column (formatted)."
    )
    kv_cache_usage_display: str | None = Field(default=None, description="KV usage for the printer column.")
    metrics: EngineMetrics | None = Field(default=None, description="Engine figures.")
    conditions: list[Condition] = Field(
        default_factory=list, description="Ready, Available, Progressing, Degraded (and InferencePoolReady)."
    )
    last_roll: Roll | None = Field(default=None, description="The most recent roll.")
    rolls: list[Roll] = Field(
        default_factory=list, description="Recent deletions (the health rate limit reads those of health reasons)."
    )
    health_rolls: list[str] = Field(
        default_factory=list,
        max_length=60,
        description="When (RFC 3339) the health rolls (Stalled, ThroughputDrift, MaxAge) of the last hour happened: "
        "the record spec.health.rolls.maxPerHour and cooldownSeconds count from. Kept apart from `rolls`, which "
        "keeps the last 20 deletions of every reason, so a rollout of many replicas cannot push them out.",
    )
    groups: list[GroupStatus] | None = Field(
        default=None, description="Multi-node services: one entry per LeaderWorkerSet group."
    )
    router: RouterStatus | None = Field(
        default=None,
        description="spec.router's pods and admission limits. The queue's depth is not here: vllm-router 0.1.17 "
        "exports no gauge of its request queue (docs/router.md).",
    )
    roles: list[RoleStatus] | None = Field(
        default=None,
        description="Disaggregated services: the prefill and the decode role. replicas and readyReplicas then "
        "count engine pods and whole units (both roles' per-unit replicas Ready).",
    )
    autoscaling: AutoscalingStatus | None = Field(
        default=None, description="spec.autoscaling's last decision: desired, current, the signals, why."
    )
    current_revision: str | None = Field(
        default=None, description="The ControllerRevision every replica ran when the last rollout completed."
    )
    update_revision: str | None = Field(default=None, description="The ControllerRevision the spec asks for.")
    revisions: list[RevisionCount] | None = Field(default=None, description="Engine pods per revision.")
    rollout: RolloutStatus | None = Field(
        default=None, description="The last spec change's rollout: phase, and with analysis what decided it."
    )


#: Any reason a status condition may carry (api/reasons.py; RolloutHealthy's are the rollout phases,
#: Autoscaling's False ones the autoscaler's holds): what `controller/status.py` ConditionRecord takes.
ConditionReason = (
    ReadyReason
    | AvailableReason
    | ProgressingReason
    | DegradedReason
    | PoolReason
    | AutoscalingReason
    | ReplicaReason
    | VerdictReason
    | KubeletReason
    | ScaleReason
    | RolloutPhase
    | Relayed
)
#: Any reason an event about a service may carry: its own, a condition's, a deletion's.
AnyEventReason = EventReason | ConditionReason | RollReason
