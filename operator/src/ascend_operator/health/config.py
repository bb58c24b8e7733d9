"""Is the engine running with the configuration the spec asked for? Checked once it first answers.

The seed's server answered 200 on /v1/models with `speculative_config=None`: a shell comment had dropped
the rest of the command line (docs/FACTS.md "Operations"). What is observable from outside is compared:
served name and max_model_len from /v1/models; speculative decoding from the presence of vLLM's
spec-decode series and the number of their `position` labels; block size (as vllm-ascend left it, which
validation makes equal to the spec's for a known model) and memory utilization from `vllm:cache_config_info`.
Field and label names come from the engine contract. Pure.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.contract import metrics as M
from ascend_operator.health.samples import EngineSample


@dataclass(frozen=True, kw_only=True)
class Expected:
    """What the spec says the engine must report."""

    served_name: str
    max_model_len: int | None
    speculative_tokens: int | None
    block_size: int
    gpu_memory_utilization: float


@dataclass(frozen=True, kw_only=True)
class Mismatch:
    """One difference between the spec and the running engine."""

    field: str
    expected: str
    actual: str

    def __str__(self) -> str:
        return f"{self.field}: expected {self.expected}, engine reports {self.actual}"


def expected_config(spec: AscendInferenceServiceSpec) -> Expected:
    """The observable settings of a spec."""
    speculative = spec.engine.speculative
    return Expected(
        served_name=spec.model.served_name,
        max_model_len=spec.engine.max_model_len,
        speculative_tokens=speculative.num_speculative_tokens if speculative else None,
        block_size=spec.engine.block_size,
        gpu_memory_utilization=spec.engine.gpu_memory_utilization,
    )


def _models(models: Mapping[str, Any], expected: Expected) -> list[Mismatch]:
    entries = {str(m.get(M.MODEL_ID)): m for m in models.get("data") or [] if isinstance(m, Mapping)}
    entry = entries.get(expected.served_name)
    if entry is None:
        return [
            Mismatch(field="servedName", expected=expected.served_name, actual=", ".join(sorted(entries)) or "none")
        ]
    actual_len = entry.get(M.MODEL_MAX_LEN)
    if expected.max_model_len is not None and actual_len != expected.max_model_len:
        return [Mismatch(field="maxModelLen", expected=str(expected.max_model_len), actual=str(actual_len))]
    return []


def _speculative(sample: EngineSample, expected: Expected) -> list[Mismatch]:
    positions = len(sample.spec_accepted_per_pos or {})
    running = sample.spec_drafts is not None
    if expected.speculative_tokens is None:
        if running:
            return [Mismatch(field="speculative", expected="off", actual=f"on ({positions} draft positions)")]
        return []
    if not running:
        return [Mismatch(field="speculative", expected=f"{expected.speculative_tokens} draft tokens", actual="off")]
    if positions != expected.speculative_tokens:
        return [
            Mismatch(
                field="speculative.numSpeculativeTokens",
                expected=str(expected.speculative_tokens),
                actual=str(positions),
            )
        ]
    return []


def _cache(sample: EngineSample, expected: Expected) -> list[Mismatch]:
    info = sample.cache_config
    if not info:
        return [Mismatch(field="cacheConfig", expected=M.CACHE_CONFIG_INFO.name, actual="absent")]
    out = []
    block = info.get(M.CACHE_BLOCK_SIZE)
    if block != str(expected.block_size):
        out.append(Mismatch(field="blockSize", expected=str(expected.block_size), actual=str(block)))
    try:
        util = float(info.get(M.CACHE_GPU_MEMORY_UTILIZATION, "nan"))
    except ValueError:
        util = float("nan")
    if not abs(util - expected.gpu_memory_utilization) < 1e-6:
        out.append(
            Mismatch(
                field="gpuMemoryUtilization",
                expected=str(expected.gpu_memory_utilization),
                actual=str(info.get(M.CACHE_GPU_MEMORY_UTILIZATION)),
            )
        )
    return out


def check_config(expected: Expected, *, models: Mapping[str, Any], sample: EngineSample) -> list[Mismatch]:
    """Every observable difference; empty when the engine runs what was asked."""
    return _models(models, expected) + _speculative(sample, expected) + _cache(sample, expected)
