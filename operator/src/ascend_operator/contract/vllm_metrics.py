"""The vLLM metrics the operator reads: name, type, labels, and the moment vLLM updates each one.

Why the moment matters: the stall detector calls "no counter moved" a stall, and in vLLM 0.25.1 most
counters move only when a step returns request outputs. During a lone chunked prefill (the seed's 256K
prefill takes 54.82 s) a partial chunk returns no output, so no IterationStats is built
(vllm/v1/engine/async_llm.py:661-664) and neither `vllm:iteration_tokens_total` nor `vllm:prompt_tokens`
moves; prompt tokens are added when the prefill completes (vllm/v1/metrics/stats.py:365-366, counted from
the request's PrefillStats). `vllm:kv_cache_usage_perc` comes with the scheduler stats of every step
(vllm/v1/metrics/loggers.py:1086). vLLM has no step counter. Sources: vllm 0.25.1 sdist.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class MetricType(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


class Update(StrEnum):
    """When vLLM changes the series."""

    EVERY_STEP = "every_step"
    """From SchedulerStats, recorded for each engine step (loggers.py:1070-1110)."""
    STEP_WITH_OUTPUTS = "step_with_outputs"
    """From IterationStats, which exists only for a step that returned request outputs (async_llm.py:663)."""
    PREFILL_COMPLETE = "prefill_complete"
    """When a request's prefill completes and its first token is output (stats.py:365-366)."""
    REQUEST_FINISHED = "request_finished"
    """When the frontend sees a request finish in an engine output (loggers.py:1184-1187); never on a client
    abort (output_processor.py:450-507)."""
    STARTUP = "startup"
    """Once, when the engine is initialised (log_metrics_info, loggers.py:1039-1061)."""


#: Every vLLM V1 engine series carries these (loggers.py:431: `labelnames = ["model_name", "engine"]`).
ENGINE_LABELS: tuple[str, ...] = ("model_name", "engine")


@dataclass(frozen=True, kw_only=True)
class Metric:
    name: str
    type: MetricType
    update: Update
    source: str
    """file:line of the metric's name in the vllm 0.25.1 sdist."""
    labels: tuple[str, ...] = ENGINE_LABELS


_L = "vllm/v1/metrics/loggers.py"
_S = "vllm/v1/spec_decode/metrics.py"
_C, _G, _H = MetricType.COUNTER, MetricType.GAUGE, MetricType.HISTOGRAM

# fmt: off
NUM_REQUESTS_RUNNING = Metric(name="vllm:num_requests_running", type=_G, update=Update.EVERY_STEP, source=f"{_L}:457")
NUM_REQUESTS_WAITING = Metric(name="vllm:num_requests_waiting", type=_G, update=Update.EVERY_STEP, source=f"{_L}:467")
# `capacity` = num_waiting_reqs, `deferred` = num_skipped_waiting_reqs (loggers.py:1080-1085): requests the
# scheduler passed over, a decode engine's requests waiting for their KV from a prefill engine among them
# (WAITING_FOR_REMOTE_KVS, vllm/v1/core/sched/scheduler.py:950). vllm:num_requests_waiting is their sum.
NUM_REQUESTS_WAITING_BY_REASON = Metric(
    name="vllm:num_requests_waiting_by_reason", type=_G, update=Update.EVERY_STEP, source=f"{_L}:477",
    labels=(*ENGINE_LABELS, "reason"),
)
KV_CACHE_USAGE = Metric(name="vllm:kv_cache_usage_perc", type=_G, update=Update.EVERY_STEP, source=f"{_L}:525")
PREFIX_CACHE_QUERIES = Metric(name="vllm:prefix_cache_queries", type=_C, update=Update.EVERY_STEP, source=f"{_L}:548")
PREFIX_CACHE_HITS = Metric(name="vllm:prefix_cache_hits", type=_C, update=Update.EVERY_STEP, source=f"{_L}:559")
NUM_PREEMPTIONS = Metric(name="vllm:num_preemptions", type=_C, update=Update.STEP_WITH_OUTPUTS, source=f"{_L}:625")
PROMPT_TOKENS = Metric(name="vllm:prompt_tokens", type=_C, update=Update.PREFILL_COMPLETE, source=f"{_L}:634")
# `external_kv_transfer`: prompt tokens whose KV another engine sent (a decode engine's prompts), counted when
# the request's first token is output (stats.py:304-311, from the PrefillStats of its first scheduling).
PROMPT_TOKENS_BY_SOURCE = Metric(
    name="vllm:prompt_tokens_by_source", type=_C, update=Update.PREFILL_COMPLETE, source=f"{_L}:644",
    labels=(*ENGINE_LABELS, "source"),
)
# A decoding request adds 1 + its accepted draft tokens per step: the scheduler counts as accepted what it
# sampled beyond the one token per step (vllm/v1/core/sched/scheduler.py:1593-1595), and a request in chunked
# prefill adds nothing until its prefill completes. So generated - accepted tokens = request-steps that decoded.
GENERATION_TOKENS = Metric(
    name="vllm:generation_tokens", type=_C, update=Update.STEP_WITH_OUTPUTS, source=f"{_L}:668"
)
# One series per FinishReason (stop, length, abort, error, repetition; loggers.py:676-689), but a request the
# client abandons never reaches it: on a disconnect AsyncLLM.abort (async_llm.py:591-593, 709-718) drops the
# request's state in OutputProcessor.abort_requests (output_processor.py:450-507) without the finished-request
# stats, which only process_outputs records (output_processor.py:669-686 -> 795-817), and later outputs of the
# request are ignored (output_processor.py:608-611). `abort` counts only aborts the engine core itself sends
# (core.py:1727). The bench counts client aborts itself and expects the engine's count to equal the requests
# its client saw complete.
REQUEST_SUCCESS = Metric(
    name="vllm:request_success", type=_C, update=Update.REQUEST_FINISHED, source=f"{_L}:678",
    labels=(*ENGINE_LABELS, "finished_reason"),
)
# Observed with prompt_token_stats.computed + num_generation_tokens of one IterationStats (loggers.py:1168-1171).
# `computed` too moves only when a prefill completes (stats.py:304-306 from the PrefillStats the first output
# carries, scheduler.py:1748), so neither its sum nor any other 0.25.1 series counts prefill chunks as they run.
ITERATION_TOKENS = Metric(
    name="vllm:iteration_tokens_total", type=_H, update=Update.STEP_WITH_OUTPUTS, source=f"{_L}:717"
)
TIME_TO_FIRST_TOKEN = Metric(
    name="vllm:time_to_first_token_seconds", type=_H, update=Update.PREFILL_COMPLETE, source=f"{_L}:760"
)
TIME_PER_OUTPUT_TOKEN = Metric(
    name="vllm:request_time_per_output_token_seconds", type=_H, update=Update.REQUEST_FINISHED, source=f"{_L}:823"
)
SPEC_DECODE_NUM_DRAFTS = Metric(
    name="vllm:spec_decode_num_drafts", type=_C, update=Update.EVERY_STEP, source=f"{_S}:229"
)
SPEC_DECODE_NUM_DRAFT_TOKENS = Metric(
    name="vllm:spec_decode_num_draft_tokens", type=_C, update=Update.EVERY_STEP, source=f"{_S}:230"
)
SPEC_DECODE_NUM_ACCEPTED_TOKENS = Metric(
    name="vllm:spec_decode_num_accepted_tokens", type=_C, update=Update.EVERY_STEP, source=f"{_S}:231"
)
# One series per draft position 0..num_speculative_tokens-1 (spec_decode/metrics.py:252-262).
SPEC_DECODE_ACCEPTED_PER_POS = Metric(
    name="vllm:spec_decode_num_accepted_tokens_per_pos", type=_C, update=Update.EVERY_STEP, source=f"{_S}:255",
    labels=(*ENGINE_LABELS, "position"),
)
# A gauge set to 1 whose labels are CacheConfig's fields as strings (vllm/config/cache.py:233-236) plus
# `engine` (loggers.py:1041); it has no model_name label.
CACHE_CONFIG_INFO = Metric(
    name="vllm:cache_config_info", type=_G, update=Update.STARTUP, source=f"{_L}:1045", labels=("engine",),
)
# fmt: on

READ: tuple[Metric, ...] = (
    NUM_REQUESTS_RUNNING, NUM_REQUESTS_WAITING, NUM_REQUESTS_WAITING_BY_REASON, KV_CACHE_USAGE,
    PREFIX_CACHE_QUERIES, PREFIX_CACHE_HITS, NUM_PREEMPTIONS, PROMPT_TOKENS, PROMPT_TOKENS_BY_SOURCE,
    GENERATION_TOKENS, REQUEST_SUCCESS, ITERATION_TOKENS, TIME_TO_FIRST_TOKEN, TIME_PER_OUTPUT_TOKEN,
    SPEC_DECODE_NUM_DRAFTS, SPEC_DECODE_NUM_DRAFT_TOKENS, SPEC_DECODE_NUM_ACCEPTED_TOKENS,
    SPEC_DECODE_ACCEPTED_PER_POS, CACHE_CONFIG_INFO,
)  # fmt: skip
"""Every metric the operator reads."""

#: CacheConfig fields (vllm/config/cache.py:49-188) that `vllm:cache_config_info` reports as labels.
#: The config check reads `block_size` (after vllm-ascend's rewrite) and `gpu_memory_utilization`.
CACHE_CONFIG_LABELS: tuple[str, ...] = (
    "block_size", "user_specified_block_size", "user_specified_mamba_block_size", "hash_block_size",
    "gpu_memory_utilization", "cache_dtype", "is_attention_free", "num_gpu_blocks_override", "sliding_window",
    "enable_prefix_caching", "prefix_caching_hash_algo", "calculate_kv_scales", "kv_cache_dtype_skip_layers",
    "mamba_page_size_padded", "skip_page_size_padded", "mamba_block_size", "mamba_cache_dtype",
    "mamba_ssm_cache_dtype", "mamba_cache_mode", "num_gpu_blocks", "num_cpu_blocks", "kv_cache_size_tokens",
    "kv_cache_max_concurrency", "kv_sharing_fast_prefill", "kv_cache_memory_bytes", "kv_offloading_size",
    "kv_offloading_backend", "_block_size_resolved",
)  # fmt: skip

#: Fields of one `/v1/models` entry (ModelCard, vllm/entrypoints/openai/engine/protocol.py:86-94); the config
#: check reads `id` (the served name) and `max_model_len`.
MODEL_CARD_FIELDS: tuple[str, ...] = (
    "id", "object", "created", "owned_by", "root", "parent", "max_model_len", "permission",
)  # fmt: skip
MODEL_CARD_SOURCE = "vllm/entrypoints/openai/engine/protocol.py:86"

# The fields the config check compares (each is in the tuple above, checked by tests/contract/).
MODEL_ID, MODEL_MAX_LEN = "id", "max_model_len"
CACHE_BLOCK_SIZE, CACHE_GPU_MEMORY_UTILIZATION = "block_size", "gpu_memory_utilization"
USER_SPECIFIED_BLOCK_SIZE = "user_specified_block_size"
"""True when `--block-size` reached the engine's CacheConfig (vllm/config/cache.py:52, set at cache.py:258)."""

#: `block_size` of `vllm:cache_config_info` is not `--block-size`: once the KV cache is built, the engine core
#: sets CacheConfig.block_size to the smallest block size of its KV cache groups (vllm/v1/engine/core.py:308-311),
#: the frontend takes that value from the ready response (core.py:1528, core_client.py:734) before its logger
#: exports the gauge (vllm/v1/engine/async_llm.py:146-166, loggers.py:1243-1244).
BLOCK_SIZE_REPORTED_SOURCE = "vllm/v1/engine/core.py:309"

#: vllm-ascend 0.25.1rc1's DeepSeek-V4 KV cache groups, by (rewritten) cache block size: MLA, SWA, C4 compressor
#: state, C128 compressor state (vllm_ascend/models/layer/attention/layer.py:32-37, read by models/deepseek_v4.py
#: 162, 191, 654 and 662; grouped by block size in patch/platform/patch_kv_cache_utils.py:70-89). Atlas A5 uses
#: other C128 state sizes (layer.py:39-43) with the same minimum.
DEEPSEEK_V4_KV_GROUP_BLOCK_SIZES: dict[int, tuple[int, ...]] = {
    128: (128, 128, 8, 32),
    64: (64, 64, 4, 16),
    32: (32, 32, 2, 8),
}
DEEPSEEK_V4_KV_GROUP_SOURCE = "vllm_ascend/models/layer/attention/layer.py:34"

#: config.json `model_type` -> {cache block size: its KV cache groups' block sizes}, for the models whose KV
#: layout the operator knows on vllm-ascend 0.25.1rc1.
KV_GROUP_BLOCK_SIZES: dict[str, dict[int, tuple[int, ...]]] = {"deepseek_v4": DEEPSEEK_V4_KV_GROUP_BLOCK_SIZES}
