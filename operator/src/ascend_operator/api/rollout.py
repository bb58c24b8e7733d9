"""`spec.rollout`: how many replicas the operator may take out at once and how long it drains one.

Why a field of its own: every deletion the operator makes (spec change, scale-down, stall, drift, age)
goes through one disruption budget (`ascend_operator.disruption`), and a planned deletion of a serving
engine waits for its requests first. Both knobs are the user's trade between rollout speed and capacity.
"""

from pydantic import Field

from ascend_operator.api.base import ApiModel

#: Seconds a 300K-token request may still need when its pod starts draining, from the seed (FACTS.md):
#: prefill of ~300K tokens at the measured 72.38 s per 256K (DP2 x TP4; TP8 54.82 s) is ~85 s; the output
#: room max-model-len 327680 leaves after 300K is ~27.7K tokens, at the slowest measured per-request decode
#: (C32 TPOT 57.1 ms) ~1580 s; together ~1665 s, rounded up to 30 minutes.
DEFAULT_DRAIN_SECONDS = 1800.0


class RolloutSpec(ApiModel):
    """The disruption budget of the operator's own deletions, and the drain before planned ones."""

    max_unavailable: int = Field(
        default=1,
        ge=1,
        le=128,
        description="Desired replicas that may be without a serving pod while the operator replaces or removes "
        "one (spec change, scale-down, drift, age). Missing, loading, draining and failing replicas count as "
        "out; a pod that is itself failing (not Ready, stalled, crashed) is replaced without consuming the "
        "budget, as a PodDisruptionBudget with unhealthyPodEvictionPolicy AlwaysAllow.",
    )
    drain_seconds: float = Field(
        default=DEFAULT_DRAIN_SECONDS,
        ge=0,
        le=86400,
        description="Before a planned deletion of a serving pod (drift, age, spec change, scale-down) the operator "
        "sets its readiness gate False (reason Draining: the Service and InferencePool stop sending it requests) "
        "and waits until its running and waiting requests reach 0, at most this long. 1800 s fits one 300K-token "
        "request started just before the drain at the seed's figures: ~85 s of prefill (72.38 s per 256K) plus "
        "the ~27.7K output tokens max-model-len 327680 leaves, at the slowest measured decode (C32 TPOT "
        "57.1 ms, ~1580 s). 0 deletes without draining. Stalled or crashed engines are never drained.",
    )
