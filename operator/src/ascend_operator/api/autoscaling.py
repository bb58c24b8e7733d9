"""spec.autoscaling and status.autoscaling: replicas that follow what the engines do.

The operator already scrapes every engine's queue, KV usage and TTFT histogram each health pass, so it
decides the replica count itself (ascend_operator.autoscale) and writes it where an HPA would: the scale
subresource's spec.replicas. The windows follow Knative's KPA and Kthena's AutoscalingPolicy: a scale-up
needs the load to last a stable window (or a panic window when it is far beyond), a scale-down needs a
long window of every scrape asking for fewer, so noise between the two never moves a replica.
Cross-field rules (minReplicas <= maxReplicas, no P/D split) are in validation/rules.py with their CEL twins.
"""

from enum import StrEnum

from pydantic import Field

from ascend_operator.api.base import ApiModel


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


class ScaleReason(StrEnum):
    """Why the autoscaler asked for the replicas it did (status.autoscaling.reason, the event's reason)."""

    # past tense, and not the roll reason ScaleDown (api/reasons.py) that the pod's deletion then records
    SCALE_UP = "ScaledUp"
    PANIC_SCALE_UP = "PanicScaledUp"
    SCALE_DOWN = "ScaledDown"
    STEADY = "Steady"
    WINDOW_FILLING = "WindowFilling"
    OUT_OF_BOUNDS = "OutOfBounds"
    NO_SIGNAL = "NoSignal"
    NO_CAPACITY = "NoCapacity"
    NOT_READY = "NotReady"
    OTHER_AUTOSCALER = "OtherAutoscaler"


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
    reason: ScaleReason = Field(description="Why.")
    message: str = Field(default="", description="The decision in words, with the figures.")
    last_scale_time: str | None = Field(default=None, description="When it last changed spec.replicas (RFC 3339).")
