"""Is the engine running with the configuration the spec asked for? Checked once it first answers.

The seed's server answered 200 on /v1/models with `speculative_config=None`: a shell comment had dropped
the rest of the command line (docs/FACTS.md "Operations"). What is observable from outside is compared:
served name and max_model_len from /v1/models; speculative decoding from the presence of vLLM's
spec-decode series and the number of their `position` labels; block size and memory utilization from
`vllm:cache_config_info`. Field and label names come from the engine contract. Pure.

Block size: the label is not `--block-size` but what vLLM resolves after building the KV cache, the smallest
block size of the model's KV cache groups (contract.vllm_metrics.BLOCK_SIZE_REPORTED_SOURCE). DeepSeek-V4 on
vllm-ascend 0.25.1rc1 has groups of 128, 128, 8 and 32 tokens at `--block-size 128`, so it reports 8. A model
with one attention group reports the flag unchanged: the CPU engine's tiny Llama does, as
vllm/platforms/cpu.py:119-126 keeps a given block size (128 only when none is given; not a multiple of 32
merely warns) and its attention kernel takes any multiple of 16 (vllm/v1/attention/backends/cpu_attn.py:55-56).
The expected value is therefore computed only for a model type whose group sizes the contract holds (the profile's
`model_type`, on the contract's engine version). For any other model it cannot be predicted: smaller groups lower
it (as on DeepSeek-V4), mamba hybrids raise it to fit their state pages
(vllm_ascend/patch/platform/patch_mamba_config.py:102-103), vllm-ascend rewrites it to 128 on other models
(additional_config.py). A guessed value would hold healthy pods out as ConfigMismatch forever, so for those models
only what is certain is checked: that `--block-size` reached the engine (`user_specified_block_size`, for every
model), which is what a truncated command line breaks. The flag's own value is accepted for a known model too:
an engine reporting exactly the block size asked is not misconfigured (a one-group model served under the
profile, as the CPU test tier does), and telling a user "expected 8" after they asked 128 would be wrong.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ascend_operator.api.profiles import load_profiles
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.contract import VLLM_VERSION
from ascend_operator.contract import additional_config as keys
from ascend_operator.contract import vllm_metrics as M
from ascend_operator.health.samples import EngineSample


@dataclass(frozen=True, kw_only=True)
class Expected:
    """What the spec says the engine must report."""

    served_name: str
    max_model_len: int | None
    speculative_tokens: int | None
    block_size: int
    """`--block-size` as rendered."""
    reported_block_size: int | None = None
    """What `vllm:cache_config_info` must report (the smallest KV cache group); None when not predictable."""
    gpu_memory_utilization: float


@dataclass(frozen=True, kw_only=True)
class Mismatch:
    """One difference between the spec and the running engine."""

    field: str
    expected: str
    actual: str

    def __str__(self) -> str:
        return f"{self.field}: expected {self.expected}, engine reports {self.actual}"


def reported_block_size(block_size: int, *, model_type: str | None) -> int | None:
    """The block size vLLM reports for `--block-size`: the smallest of the model's KV cache groups at the block
    size vllm-ascend keeps (core.py:308-311 after utils.py:1228-1278), or None when the groups are unknown."""
    groups = M.KV_GROUP_BLOCK_SIZES.get(model_type or "")
    if groups is None:
        return None
    sizes = groups.get(keys.effective_block_size(block_size, model_type=model_type))
    return min(sizes) if sizes else None


def expected_config(spec: AscendInferenceServiceSpec) -> Expected:
    """The observable settings of a spec."""
    speculative = spec.engine.speculative
    profile = load_profiles().get(spec.model.profile or "")
    contract_engine = spec.engine.engine_version in (None, VLLM_VERSION)
    model_type = profile.model_type if profile and contract_engine else None
    return Expected(
        served_name=spec.model.served_name,
        max_model_len=spec.engine.max_model_len,
        speculative_tokens=speculative.num_speculative_tokens if speculative else None,
        block_size=spec.engine.block_size,
        reported_block_size=reported_block_size(spec.engine.block_size, model_type=model_type),
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
    out = _block_size(info, expected)
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


def _block_size(info: Mapping[str, str], expected: Expected) -> list[Mismatch]:
    block = info.get(M.CACHE_BLOCK_SIZE)
    if info.get(M.USER_SPECIFIED_BLOCK_SIZE) == "False":
        return [
            Mismatch(field="blockSize", expected=f"--block-size {expected.block_size}", actual=f"its default {block}")
        ]
    resolved = expected.reported_block_size
    if resolved is not None and block not in (str(resolved), str(expected.block_size)):
        return [
            Mismatch(
                field="blockSize",
                expected=f"{resolved} (the smallest KV cache group at --block-size {expected.block_size}) or "
                f"{expected.block_size}",
                actual=str(block),
            )
        ]
    return []


def check_config(expected: Expected, *, models: Mapping[str, Any], sample: EngineSample) -> list[Mismatch]:
    """Every observable difference; empty when the engine runs what was asked."""
    return _models(models, expected) + _speculative(sample, expected) + _cache(sample, expected)
