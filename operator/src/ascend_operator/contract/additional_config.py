"""vllm-ascend v0.25.1rc1 `--additional-config` keys the API sets, each with the line that reads it.

Why: vllm-ascend reads additional-config with `.get(key, default)`, so a key it does not read is ignored
without a word. The seed's long-context switch used to render `enable_context_parallel`, which no code in
v0.25.1rc1 reads; DSA-CP is `enable_dsa_cp` (vllm_ascend/utils.py:1387-1394) and it raises unless
FlashComm1 / sequence parallel is on too (`enable_flashcomm1`, utils.py:873 and 1390-1393), which is also
what the DeepSeek-V4-Flash-DSpark tutorial sets (docs/source/tutorials/models/DeepSeek-V4-Flash-DSpark.md:60-61).
tests/contract/test_additional_config.py checks each key is read at the cited place.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Key:
    name: str
    source: str
    """file:line in the vllm-ascend 0.25.1rc1 sdist where the key is read."""


_A = "vllm_ascend/ascend_config.py"
_U = "vllm_ascend/utils.py"

ENABLE_SHARED_EXPERT_DP = Key(name="enable_shared_expert_dp", source=f"{_A}:102")
MULTISTREAM_OVERLAP_SHARED_EXPERT = Key(name="multistream_overlap_shared_expert", source=f"{_A}:126")
ENABLE_CPU_BINDING = Key(name="enable_cpu_binding", source=f"{_A}:147")
ENABLE_PREFILL_MC2 = Key(name="enable_prefill_mc2", source=f"{_A}:150")
ENABLE_FUSED_MC2 = Key(name="enable_fused_mc2", source=f"{_A}:154")
ENABLE_REDUCE_SAMPLE = Key(name="enable_reduce_sample", source=f"{_A}:273")
ENABLE_FLASHCOMM1 = Key(name="enable_flashcomm1", source=f"{_U}:873")
ENABLE_DSA_CP = Key(name="enable_dsa_cp", source=f"{_U}:1387")

#: Keys a typed field of the spec (or spec.engine.longContext) sets; `additionalConfig.extra` may not repeat them.
TYPED: tuple[Key, ...] = (
    ENABLE_SHARED_EXPERT_DP, MULTISTREAM_OVERLAP_SHARED_EXPERT, ENABLE_PREFILL_MC2, ENABLE_FUSED_MC2,
    ENABLE_REDUCE_SAMPLE, ENABLE_CPU_BINDING, ENABLE_FLASHCOMM1, ENABLE_DSA_CP,
)  # fmt: skip
TYPED_NAMES: tuple[str, ...] = tuple(k.name for k in TYPED)

#: The long-context path: DSA-CP needs FlashComm1 (utils.py:1390-1393), so both are set.
LONG_CONTEXT: tuple[Key, ...] = (ENABLE_DSA_CP, ENABLE_FLASHCOMM1)

#: Keys vllm-ascend removed in v0.12.0rc1 (no read left in v0.25.1rc1): an engine ignores them silently.
REMOVED: tuple[str, ...] = ("torchair_graph_config", "ascend_scheduler_config", "enable_context_parallel")

#: vllm-ascend's block-size rewrite (refresh_block_size, utils.py:1228-1278, called from platform.py:627):
#: on `deepseek_v4` only these survive, anything else becomes 32 (utils.py:1245-1254); on other non-hybrid
#: models any block size but 128 becomes 128 when prefix caching or chunked prefill is on (utils.py:1261-1265),
#: which vLLM V1 enables by default.
DEEPSEEK_V4_BLOCK_SIZES: tuple[int, ...] = (32, 64, 128)
DEEPSEEK_V4_FALLBACK_BLOCK_SIZE = 32
DEFAULT_BLOCK_SIZE = 128
BLOCK_SIZE_SOURCE = f"{_U}:1228"


def effective_block_size(requested: int | None, *, model_type: str | None, prefix_or_chunked: bool = True) -> int:
    """The block size vllm-ascend leaves in CacheConfig for a requested one."""
    if requested is None:
        return DEFAULT_BLOCK_SIZE
    if model_type == "deepseek_v4":
        return requested if requested in DEEPSEEK_V4_BLOCK_SIZES else DEEPSEEK_V4_FALLBACK_BLOCK_SIZE
    if requested != DEFAULT_BLOCK_SIZE and prefix_or_chunked:
        return DEFAULT_BLOCK_SIZE
    return requested
