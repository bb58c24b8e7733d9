"""The model profiles: measured per-NPU memory of each model the operator knows, by TP x DP layout.

Why in the api: `spec.model.profile` names one, and three layers read them: validation (the HBM/KV budget
and the block-size rule), health (the effective-config check compares the engine's KV pool with the
measured one) and the simulator's figures. Each used to load them through the validation's budget module;
they are data the API ships (`ascend_operator/data/model_profiles.yaml`, docs/FACTS.md "Memory / KV budget
(per NPU)"), so the leaf loads them once and every layer reads them from here.
"""

from functools import cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field


class Layout(BaseModel):
    """Per-NPU memory of one TP x DP layout, measured at the profile's utilization."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tensor: int
    data: int
    nodes: int = 1
    """Nodes the layout spans; a one-node measurement says nothing about the per-NPU memory of a wider EP."""
    weights_gib: float
    activation_gib: float
    non_torch_gib: float
    graph_gib: float
    free_kv_gib: float
    kv_pool_tokens: int
    kv_pool_tokens_long_context: int

    @property
    def fixed_gib(self) -> float:
        """Memory taken before any KV: weights, activations, non-torch allocations, graphs."""
        return self.weights_gib + self.activation_gib + self.non_torch_gib + self.graph_gib


class ModelProfile(BaseModel):
    """Measured memory behaviour of one model on Atlas 800 A2."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str
    routed_experts: int | None = None
    model_type: str | None = None
    """config.json `model_type`; vllm-ascend's block-size rule depends on it (contract.additional_config)."""
    startup_kib_per_model_len_token: float
    startup_kib_per_batched_token: float
    kv_pool_tokens_per_context_token: float = Field(default=1.0, ge=1.0)
    """Pool tokens (the engine's "GPU KV cache size") one token of context takes: above 1 for a hybrid KV
    whose groups fill unevenly (the profile's yaml gives the measurement it comes from)."""
    measured_at_utilization: float = Field(gt=0, le=1)
    layouts: list[Layout]

    def layout(self, *, tensor: int, data: int, nodes: int = 1) -> Layout | None:
        """The measured layout for this TP x DP over this many nodes, if any."""
        wanted = (tensor, data, nodes)
        return next((lay for lay in self.layouts if (lay.tensor, lay.data, lay.nodes) == wanted), None)


@cache
def load_profiles() -> dict[str, ModelProfile]:
    """The packaged model profiles, parsed once."""
    text = resources.files("ascend_operator.data").joinpath("model_profiles.yaml").read_text()
    raw = yaml.safe_load(text)
    return {name: ModelProfile.model_validate(body) for name, body in raw.items()}
