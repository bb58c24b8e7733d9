"""spec.autoscaling and status.autoscaling: replicas that follow what the engines do.

The operator already scrapes every engine's queue, KV usage and TTFT histogram each health pass, so it
decides the replica count itself (ascend_operator.autoscale) and writes it where an HPA would: the scale
subresource's spec.replicas. The windows follow Knative's KPA and Kthena's AutoscalingPolicy: a scale-up
needs the load to last a stable window (or a panic window when it is far beyond), a scale-down needs a
long window of every scrape asking for fewer, so noise between the two never moves a replica.
Cross-field rules (minReplicas <= maxReplicas, the P/D pools' bounds and ratio) are in validation/rules.py
and validation/autoscaling_rules.py with their CEL twins.

A P/D split (spec.disaggregation) scales its two pools apart (`pd`): the prefill pool on its queued prompt
tokens and TTFT, the decode pool on its running requests over slots, KV usage and TPOT, each within its own
bounds, and the two counts kept within a decode-per-prefill ratio the user sets, as Kthena's
AutoscalingPolicyBinding keeps the roles of a P/D ModelServing within a `ratioConstraint` of each other.
"""

import math
from enum import StrEnum

from pydantic import Field

from ascend_operator.api.base import ApiModel

#: Float slack on ratio products (0.1 x 30 is 3.0000000000000004).
RATIO_EPS = 1e-9


class AutoscalingTargets(ApiModel):
    """What one replica should carry; beyond any target, another replica is wanted."""

    waiting_per_replica: float = Field(
        default=2.0,
        ge=0,
        le=1024,
        description="Requests waiting per replica beyond its slots (vLLM's `num_requests_waiting`, running "
        "ones fill maxNumSeqs x DP slots first). Wanted replicas = ceil((running + waiting) / (slots + this)).",
    )
    kv_cache_usage: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="KV cache usage (0..1) of the fullest Ready engine; wanted replicas = ceil(Ready x usage / this).",
    )
    ttft_p90_seconds: float | None = Field(
        default=None,
        gt=0,
        le=3600,
        description="Engine TTFT p90 over the last 30 s, from the engines' own histograms; above it one "
        "more replica than are Ready is wanted. Unset: TTFT does not scale.",
    )
    queued_prompt_tokens_per_replica: float = Field(
        default=16384,
        gt=0,
        le=16_777_216,
        description="P/D prefill pool only: prompt tokens waiting to be prefilled per replica (waiting "
        "requests x the pool's mean prompt length over the last 30 s). Wanted prefill replicas = "
        "ceil(queued prompt tokens / this).",
    )
    tpot_p90_seconds: float | None = Field(
        default=None,
        gt=0,
        le=60,
        description="P/D decode pool only: engine time per output token p90 over the last 30 s; above it one "
        "more decode replica than are Ready is wanted. Unset: TPOT does not scale.",
    )


class PoolAutoscaling(ApiModel):
    """One P/D pool's bounds and targets; unset bounds are spec.autoscaling's."""

    min_replicas: int | None = Field(
        default=None, ge=1, le=128, description="Fewest engines of this pool. Unset: spec.autoscaling.minReplicas."
    )
    max_replicas: int | None = Field(
        default=None, ge=1, le=128, description="Most engines of this pool. Unset: spec.autoscaling.maxReplicas."
    )
    targets: AutoscalingTargets | None = Field(
        default=None,
        description="Per-replica targets of this pool (the prefill pool reads queuedPromptTokensPerReplica "
        "and ttftP90Seconds, the decode pool waitingPerReplica, kvCacheUsage and tpotP90Seconds). Unset: "
        "spec.autoscaling.targets.",
    )


class PoolRatio(ApiModel):
    """Decode engines per prefill engine the two pools keep (Kthena's `ratioConstraint`)."""

    at_least: float = Field(default=0.25, gt=0, le=64, description="Fewest decode engines per prefill engine.")
    at_most: float = Field(default=4.0, gt=0, le=64, description="Most decode engines per prefill engine.")


class PdAutoscaling(ApiModel):
    """How a P/D split's two pools scale apart: each on its own signals, within the ratio."""

    prefill: PoolAutoscaling = Field(default_factory=PoolAutoscaling, description="The prefill pool.")
    decode: PoolAutoscaling = Field(default_factory=PoolAutoscaling, description="The decode pool.")
    decode_per_prefill: PoolRatio = Field(
        default_factory=PoolRatio,
        description="Bounds on decode engines / prefill engines. A pool that scales up past the bound pulls "
        "the other pool up with it (up to its maxReplicas); a pool that would scale down past it is held.",
    )


class AutoscalingSpec(ApiModel):
    """The operator scales spec.replicas (through the scale subresource) on the engines' own signals."""

    min_replicas: int = Field(
        default=1, ge=1, le=128, description="Fewest replicas; at least 1 (a request never waits for a cold start)."
    )
    max_replicas: int = Field(ge=1, le=128, description="Most replicas (each holds `npus` NPUs per node).")
    targets: AutoscalingTargets = Field(default_factory=AutoscalingTargets, description="Per-replica targets.")
    scale_up_window_seconds: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="Stable window: every scrape over this long must want more replicas before one is added "
        "(the queue lasts, not a burst).",
    )
    panic_window_seconds: float = Field(
        default=6.0,
        ge=0,
        le=3600,
        description="Panic window: when every scrape over this shorter window wants at least twice the "
        "replicas there are, they are added without waiting for the stable window.",
    )
    scale_down_window_seconds: float = Field(
        default=300.0,
        ge=0,
        le=86400,
        description="Every scrape over this long must want fewer replicas, and the last scale be this long "
        "ago, before one goes (through spec.rollout's budget and drain, the least busy first).",
    )
    pd: PdAutoscaling | None = Field(
        default=None,
        description="With spec.disaggregation: each pool's bounds and targets and the decode-per-prefill "
        'ratio (docs/autoscaling.md, "P/D pools"). Unset on a P/D split: both pools within '
        "minReplicas..maxReplicas on the default targets, ratio 0.25..4.",
    )

    def pool(self, role: str) -> "AutoscalingSpec":
        """A pool's own spec: its bounds and targets in place of these (the same windows)."""
        pools = self.pd or PdAutoscaling()
        mine = pools.prefill if role == "prefill" else pools.decode
        return self.model_copy(
            update={
                "min_replicas": mine.min_replicas if mine.min_replicas is not None else self.min_replicas,
                "max_replicas": mine.max_replicas if mine.max_replicas is not None else self.max_replicas,
                "targets": mine.targets or self.targets,
                "pd": None,
            }
        )

    def ratio_reachable(self) -> bool:
        """Whether some prefill and decode counts within both pools' bounds keep the decode-per-prefill ratio
        (True while the bounds or the ratio are out of order: their own rules say so)."""
        ratio = (self.pd or PdAutoscaling()).decode_per_prefill
        prefill, decode = self.pool("prefill"), self.pool("decode")
        if ratio.at_least > ratio.at_most or any(p.min_replicas > p.max_replicas for p in (prefill, decode)):
            return True
        for p in range(prefill.min_replicas, prefill.max_replicas + 1):
            low = max(decode.min_replicas, math.ceil(ratio.at_least * p - RATIO_EPS))
            if low <= min(decode.max_replicas, math.floor(ratio.at_most * p + RATIO_EPS)):
                return True
        return False


class ScaleReason(StrEnum):
    """Why the autoscaler asked for the replicas it did (status.autoscaling.reason, the event's reason)."""

    # past tense, and not the roll reason ScaleDown (api/reasons.py) that the pod's deletion then records
    SCALE_UP = "ScaledUp"
    """The load asked for more replicas over the whole scale-up window: spec.replicas was raised."""
    PANIC_SCALE_UP = "PanicScaledUp"
    """The load over the short panic window asked for at least twice the replicas: raised at once."""
    SCALE_DOWN = "ScaledDown"
    """No scrape over the scale-down window wanted more than fewer replicas: spec.replicas was lowered (the
    pods that go are drained and recorded as ScaleDown rolls)."""
    STEADY = "Steady"
    """The windows are covered and the replicas there are what the load wants: nothing to do."""
    WINDOW_FILLING = "WindowFilling"
    """Fewer scrapes than the scale-up window holds (just started or resumed): the autoscaler holds."""
    OUT_OF_BOUNDS = "OutOfBounds"
    """spec.replicas was outside minReplicas..maxReplicas (edited by hand, or the bounds changed): set back
    within them."""
    NO_SIGNAL = "NoSignal"
    """No engine answered its /metrics: nothing to scale on, so the autoscaler holds. Check the engines."""
    NO_CAPACITY = "NoCapacity"
    """More replicas are wanted but one is already Pending (no node has the NPUs for it): no more are asked
    until it is placed. Free or add NPUs."""
    NOT_READY = "NotReady"
    """A scale-down would do, but fewer replicas than it keeps are Ready: no replica goes until they serve."""
    OTHER_AUTOSCALER = "OtherAutoscaler"
    """A HorizontalPodAutoscaler scales this service too: the operator leaves spec.replicas to it. Delete
    the HPA or spec.autoscaling."""
    RATIO_BOUND = "RatioBound"
    """P/D: a pool's own decision was changed to keep decode per prefill within
    spec.autoscaling.pd.decodePerPrefill (the message says what the pool asked)."""


class AutoscalingStatus(ApiModel):
    """The autoscaler's last decision and what it saw."""

    desired_replicas: int = Field(description="Replicas the autoscaler asks for.")
    current_replicas: int = Field(description="spec.replicas when it decided.")
    ready_replicas: int = Field(default=0, description="Replicas Ready.")
    loading_replicas: int = Field(
        default=0, description="Replicas still loading (inside startup grace): coming capacity, not missing."
    )
    wanted_replicas: int | None = Field(default=None, description="What the last scrape alone asked for.")
    waiting_requests: float | None = Field(default=None, description="Requests waiting, summed over engines.")
    running_requests: float | None = Field(default=None, description="Requests running, summed over engines.")
    slots_per_replica: int | None = Field(default=None, description="Sequences one replica runs at once.")
    kv_cache_usage: float | None = Field(default=None, description="KV usage of the fullest Ready engine.")
    ttft_p90_seconds: float | None = Field(default=None, description="Engine TTFT p90 over the last 30 s.")
    queued_prompt_tokens: float | None = Field(
        default=None, description="P/D prefill pool: prompt tokens waiting (waiting requests x mean prompt length)."
    )
    tpot_p90_seconds: float | None = Field(default=None, description="P/D decode pool: TPOT p90 over the last 30 s.")
    reason: ScaleReason = Field(description="Why.")
    message: str = Field(default="", description="The decision in words, with the figures.")
    last_scale_time: str | None = Field(default=None, description="When it last changed spec.replicas (RFC 3339).")
