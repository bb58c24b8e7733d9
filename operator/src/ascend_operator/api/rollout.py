"""`spec.rollout`: how many replicas the operator may take out at once, how long it drains one, how many
earlier specs it keeps, and whether a spec change is judged on its first replica.

Why a field of its own: every deletion the operator makes (spec change, scale-down, stall, drift, age)
goes through one disruption budget (`ascend_operator.disruption`), and a planned deletion of a serving
engine waits for its requests first. Both knobs are the user's trade between rollout speed and capacity.
`analysis` is the trade between rollout speed and the risk of a change that works, only worse: the first
replica on the new spec is compared with the replicas still on the previous one (controller/rollout.py,
the comparison in ascend_operator/rollout_analysis) before the rest follow.
"""

from pydantic import Field

from ascend_operator.api.base import ApiModel

#: Seconds a 300K-token request may still need when its pod starts draining, from the seed (FACTS.md):
#: prefill of ~300K tokens at the measured 72.38 s per 256K (DP2 x TP4; TP8 54.82 s) is ~85 s; the output
#: room max-model-len 327680 leaves after 300K is ~27.7K tokens, at the slowest measured per-request decode
#: (C32 TPOT 57.1 ms) ~1580 s; together ~1665 s, rounded up to 30 minutes.
DEFAULT_DRAIN_SECONDS = 1800.0


class AnalysisThresholds(ApiModel):
    """How much worse the new revision's replica may be than the previous revision's, per signal, before the
    change is rolled back. Ratios are canary / baseline; noise between two equal engines under one router
    stays within ~10 % on a window of a few dozen requests, so the defaults leave room for it."""

    ttft_p90_ratio: float = Field(
        default=1.5,
        ge=1,
        le=100,
        description="TTFT p90 of the new replica over the previous replicas' (from the engines' "
        "vllm:time_to_first_token_seconds histograms, over the same window); above it, and at least 0.1 s more: "
        "rolled back.",
    )
    tpot_p90_ratio: float = Field(
        default=1.3,
        ge=1,
        le=100,
        description="TPOT p90 (vllm:time_per_output_token_seconds) of the new replica over the previous ones'; "
        "above it, and at least 5 ms more: rolled back.",
    )
    tokens_per_request_ratio: float = Field(
        default=0.75,
        gt=0,
        le=1,
        description="Output tokens per second per running request of the new replica over the previous ones'; "
        "below it: rolled back.",
    )
    waiting_per_replica: float = Field(
        default=2.0,
        ge=0,
        le=1024,
        description="Requests waiting (vllm:num_requests_waiting, the window's mean) on the new replica beyond "
        "the previous replicas' mean per replica; above it: rolled back.",
    )
    error_rate: float = Field(
        default=0.02,
        ge=0,
        le=1,
        description="Share of the new replica's finished requests that ended in an engine error (vLLM 0.25.1's "
        "finished_reason `error`, a request-level internal error always answered 500: vllm/v1/engine/"
        "__init__.py:42-61, counted by vllm:request_success) beyond the previous replicas' share; above it, with "
        "at least two such errors: rolled back.",
    )
    canary_failures: int = Field(
        default=0,
        ge=0,
        le=100,
        description="Generation canaries (spec.health.canary) that failed on the new replica during the window "
        "beyond this many: rolled back.",
    )
    min_requests: int = Field(
        default=20,
        ge=1,
        le=100000,
        description="Requests that got their first token in the window (the TTFT histogram's count) on the new "
        "replica and per previous replica, for a comparison; fewer on either side: the window is extended (judged "
        "again at each health pass as it grows), never judged on too little traffic.",
    )


class AnalysisSpec(ApiModel):
    """A spec change replaces one replica first and judges it on the engine's own figures."""

    seconds: float = Field(
        default=120.0,
        ge=5,
        le=86400,
        description="The analysis window: how long the new revision's first replica serves before it is compared "
        "with the replicas still on the previous revision over the same scrapes. The window starts once that "
        "replica is Ready by the health judgement (generation canary and effective-config check passed) and "
        "carries at least half the requests in flight (running and waiting) of a previous replica, so neither "
        "its load nor the clients moving to it are judged; it is extended while either side has fewer than "
        "thresholds.minRequests. A window shorter than the service's long requests judges only their starts.",
    )
    thresholds: AnalysisThresholds = Field(
        default_factory=AnalysisThresholds, description="How much worse per signal rolls the change back."
    )


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
    revision_history_limit: int = Field(
        default=10,
        ge=1,
        le=100,
        description="Earlier specs kept as ControllerRevisions (owned by the service) besides the current and "
        "the updated one, for `aisctl rollout history` and `aisctl rollout undo`.",
    )
    analysis: AnalysisSpec | None = Field(
        default=None,
        description="Judge a spec change on its first replica: once it is Ready and carries half a previous "
        "replica's requests in flight, it serves for `seconds` and is compared with the replicas still on the "
        "previous revision over the same window (generation canary failures, engine errors, TTFT and TPOT p90, "
        "output tokens/s per running request, queue; too little traffic extends the window); worse beyond a "
        "threshold rolls it back through the budget and the rollout stops (status.rollout) until the spec "
        "changes again or `aisctl rollout undo`. With one replica it is compared with the figures recorded "
        "before the change. Unset: every replica is replaced in turn.",
    )
