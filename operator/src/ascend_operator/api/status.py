"""The status of an AscendInferenceService, as the operator writes it.

Conditions follow the Kubernetes convention (type, status, reason in CamelCase, message,
lastTransitionTime, observedGeneration), so `kubectl wait --for=condition=Ready` works on a service.
"""

from pydantic import Field

from ascend_operator.api.base import ApiModel

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"


class Condition(ApiModel):
    """One status condition."""

    type: str = Field(description="Ready, Progressing or Degraded.")
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
    acceptance_length: float | None = Field(default=None, description="Speculative acceptance length.")


class AscendInferenceServiceStatus(ApiModel):
    """Observed state."""

    observed_generation: int | None = Field(default=None, description="Last spec generation acted on.")
    replicas: int = Field(default=0, description="Engine pods that exist.")
    ready_replicas: int = Field(default=0, description="Engine pods that are Ready.")
    desired_replicas: int = Field(default=0, description="spec.replicas.")
    updated_replicas: int = Field(default=0, description="Engine pods that run the current spec.")
    tokens_per_second_display: str | None = Field(
        default=None, description="Tokens/s for the printer column (formatted)."
    )
    kv_cache_usage_display: str | None = Field(default=None, description="KV usage for the printer column.")
    metrics: EngineMetrics | None = Field(default=None, description="Engine figures.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready, Progressing, Degraded.")
