"""Prometheus exposition in vLLM V1's exact names, types, labels and buckets.

Why this module exists: the operator's health checker and dashboards read a real vLLM's /metrics; the
simulator must emit the same series so the same code is exercised. Names, documentation, label sets
(`model_name`, `engine`) and buckets are copied from vLLM's vllm/v1/metrics/loggers.py
(PrometheusStatLogger) and vllm/v1/spec_decode/metrics.py (SpecDecodingProm); `vllm:cache_config_info`
follows loggers.py `log_metrics_info` with labels from vllm/config/cache.py `CacheConfig.metrics_info()`
(every config field as a string, plus `engine`, and no `model_name`). Spec-decode series exist only when a
speculative config is set, as in SpecDecodingProm. The values are fed by the engine; this module only
records them.

Where each value comes from in vLLM (the API server's output handler calls record() once per batch of
engine-core outputs, vllm/v1/engine/async_llm.py:655-703), which decides what a stopped engine core shows:
- SchedulerStats, built by the engine core's scheduler after a step (vllm/v1/core/sched/scheduler.py:1839-1849,
  2276-2306): num_requests_running, num_requests_waiting(_by_reason), kv_cache_usage_perc,
  prefix_cache_queries/hits, external_prefix_cache_*, spec_decode_*, estimated_*_per_gpu;
- IterationStats, built by the frontend's OutputProcessor from the outputs a step returned
  (vllm/v1/engine/output_processor.py:613-686, vllm/v1/metrics/stats.py:353-460): prompt_tokens(_by_source,
  _cached), generation_tokens, num_preemptions, iteration_tokens_total, time_to_first_token,
  inter_token_latency, and at a request's finish request_success and the per-request histograms;
- frontend-only: mm_cache_* (the renderer's cache, async_llm.py:701) and engine_sleep_state (set at start and
  by /sleep, loggers.py:1210-1227).
So every series but the last two moves only when an engine core steps: SIGSTOP it and all of them freeze.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ascend_operator.contract.vllm_metrics import CACHE_CONFIG_LABELS

LABELS = ("model_name", "engine")
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")  # vllm/v1/engine/__init__.py:30
WAITING_REASONS = ("capacity", "deferred")  # vllm/v1/metrics/loggers.py:36-37
PROMPT_TOKEN_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")  # vllm/v1/metrics/stats.py:292
TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
)  # fmt: skip
ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, ... up to max_value."""
    out: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return out
            out.append(value)
        exponent += 1


@dataclass
class FinishedRequest:
    """vLLM's FinishedRequestStats, in engine seconds."""

    finish_reason: str
    e2e_latency: float
    num_prompt_tokens: int
    num_generation_tokens: int
    max_tokens_param: int | None
    queued_time: float
    prefill_time: float
    inference_time: float
    decode_time: float
    mean_time_per_output_token: float
    num_cached_tokens: int = 0


@dataclass
class IterationRecord:
    """One engine step's IterationStats plus the SchedulerStats published after it."""

    num_prompt_tokens: int = 0
    num_cached_prompt_tokens: int = 0
    """PromptTokenStats.cached_tokens: of the prompts that completed prefill this step, the prefix-cache hits."""
    num_external_prompt_tokens: int = 0
    """PromptTokenStats.external_kv_transfer: of those prompts, the tokens whose KV another engine sent."""
    num_generation_tokens: int = 0
    num_preempted_reqs: int = 0
    time_to_first_tokens: list[float] = field(default_factory=list)
    inter_token_latencies: list[float] = field(default_factory=list)
    max_num_generation_tokens: list[int] = field(default_factory=list)
    n_params: list[int] = field(default_factory=list)
    finished: list[FinishedRequest] = field(default_factory=list)
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)


class VllmMetrics:
    """Registry with vLLM V1's series for engines 0..n-1 of one served model, registered in
    PrometheusStatLogger.__init__'s order (spec decode and perf counters first, loggers.py:437-455)."""

    def __init__(
        self,
        *,
        model_name: str,
        num_engines: int,
        max_model_len: int,
        num_spec_tokens: int,
        cache_config_info: Mapping[str, str],
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        labels = list(LABELS)
        self.engines = [str(i) for i in range(num_engines)]
        self.model_name = model_name

        def gauge(name: str, doc: str, extra: Sequence[str] = ()) -> Gauge:
            return Gauge(name, doc, [*labels, *extra], registry=reg, multiprocess_mode="mostrecent")

        def counter(name: str, doc: str, extra: Sequence[str] = ()) -> Counter:
            return Counter(name, doc, [*labels, *extra], registry=reg)

        def hist(name: str, doc: str, buckets: Sequence[float]) -> Histogram:
            return Histogram(name, doc, labels, registry=reg, buckets=list(buckets))

        self.num_spec_tokens = num_spec_tokens
        if num_spec_tokens > 0:  # SpecDecodingProm (vllm/v1/spec_decode/metrics.py:200-265)
            self.spec_drafts = counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
            self.spec_draft_tokens = counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.")
            self.spec_accepted = counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.")
            self.spec_per_pos = counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.", ["position"]
            )
        # PerfMetricsProm (vllm/v1/metrics/perf.py:1564-1604): always registered; only --enable-mfu-metrics feeds
        # it (a flag the rendered pods do not set), so these stay 0.
        mfu = "per GPU (for Model Flops Utilization calculations)."
        self.perf = [
            counter("vllm:estimated_flops_per_gpu_total", f"Estimated number of floating point operations {mfu}"),
            counter("vllm:estimated_read_bytes_per_gpu_total", f"Estimated number of bytes read from memory {mfu}"),
            counter("vllm:estimated_write_bytes_per_gpu_total", f"Estimated number of bytes written to memory {mfu}"),
        ]
        self.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.waiting_by_reason = gauge(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "
            "'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). "
            "Sum of all reasons equals vllm:num_requests_waiting.",
            ["reason"],
        )
        self.sleep_state = gauge(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
            "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
            ["sleep_state"],
        )
        self.kv_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.prefix_queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        # Fed only by a KV connector (loggers.py:1093-1099) and a multi-modal cache (loggers.py:1136-1138);
        # the rendered pods have neither, so these stay 0.
        self.zero_counters = [
            counter(
                "vllm:external_prefix_cache_queries",
                "External prefix cache queries from KV connector cross-instance cache sharing, "
                "in terms of number of queried tokens.",
            ),
            counter(
                "vllm:external_prefix_cache_hits",
                "External prefix cache hits from KV connector cross-instance cache sharing, "
                "in terms of number of cached tokens.",
            ),
            counter("vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items."),
            counter("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items."),
        ]
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.prompt_by_source = counter(
            "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", ["source"]
        )
        self.prompt_cached = counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        self.request_success = counter(
            "vllm:request_success", "Count of successfully processed requests.", ["finished_reason"]
        )
        token_buckets = build_1_2_5_buckets(max_model_len)
        self.req_prompt_tokens = hist(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", token_buckets
        )
        self.req_generation_tokens = hist(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", token_buckets
        )
        self.iteration_tokens = hist(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_BUCKETS
        )
        self.req_max_num_generation_tokens = hist(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            token_buckets,
        )
        self.req_params_n = hist("vllm:request_params_n", "Histogram of the n request parameter.", (1, 2, 5, 10, 20))
        self.req_params_max_tokens = hist(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", token_buckets
        )
        self.ttft = hist(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS)
        self.req_tpot = hist(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        lat = REQUEST_LATENCY_BUCKETS
        self.e2e = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", lat)
        self.queue_time = hist(
            "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", lat
        )
        self.inference_time = hist(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            lat,
        )
        self.prefill_time = hist(
            "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", lat
        )
        self.decode_time = hist(
            "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", lat
        )
        self.prefill_kv_computed = hist(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            token_buckets,
        )
        info = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            [*cache_config_info.keys(), "engine"],
            registry=reg,
            multiprocess_mode="mostrecent",
        )
        for engine in self.engines:
            self._touch(engine)
            info.labels(**cache_config_info, engine=engine).set(1)

    def _touch(self, engine: str) -> None:
        """Create every labelled child up front: vLLM's make_per_engine exposes zeros from the start."""
        lv = (self.model_name, engine)
        for metric in (
            *self.perf,
            self.running,
            self.waiting,
            self.kv_usage,
            self.prefix_queries,
            self.prefix_hits,
            *self.zero_counters,
            self.preemptions,
            self.prompt_tokens,
            self.prompt_cached,
            self.generation_tokens,
            self.req_prompt_tokens,
            self.req_generation_tokens,
            self.iteration_tokens,
            self.req_max_num_generation_tokens,
            self.req_params_n,
            self.req_params_max_tokens,
            self.ttft,
            self.itl,
            self.req_tpot,
            self.e2e,
            self.queue_time,
            self.inference_time,
            self.prefill_time,
            self.decode_time,
            self.prefill_kv_computed,
        ):
            metric.labels(*lv)
        for reason in WAITING_REASONS:
            self.waiting_by_reason.labels(*lv, reason)
        # record_sleep_state() at start: awake (loggers.py:510-513, 1210-1227).
        for state, value in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
            self.sleep_state.labels(*lv, state).set(value)
        for source in PROMPT_TOKEN_SOURCES:
            self.prompt_by_source.labels(*lv, source)
        for reason in FINISH_REASONS:
            self.request_success.labels(*lv, reason)
        if self.num_spec_tokens > 0:
            for metric in (self.spec_drafts, self.spec_draft_tokens, self.spec_accepted):
                metric.labels(*lv)
            for pos in range(self.num_spec_tokens):
                self.spec_per_pos.labels(*lv, str(pos))

    def set_scheduler_state(
        self, *, engine: int, running: int, waiting: int, kv_usage: float, queries: int, hits: int, deferred: int = 0
    ) -> None:
        """SchedulerStats as record() applies them (loggers.py:1067-1091): the engine core ships them with a
        step's outputs, so they move only when an engine core steps. `deferred` of the `waiting`: requests the
        scheduler passes over (here: a decode engine's requests waiting for their KV, or whose KV arrived while
        every running slot was taken: `Scheduler.num_deferred`; no LoRA or grammar)."""
        lv = (self.model_name, str(engine))
        self.running.labels(*lv).set(running)
        self.waiting.labels(*lv).set(waiting)
        self.waiting_by_reason.labels(*lv, "capacity").set(waiting - deferred)
        self.waiting_by_reason.labels(*lv, "deferred").set(deferred)
        self.kv_usage.labels(*lv).set(kv_usage)
        if queries:
            self.prefix_queries.labels(*lv).inc(queries)
        if hits:
            self.prefix_hits.labels(*lv).inc(hits)

    def record_iteration(self, *, engine: int, it: IterationRecord) -> None:
        """As PrometheusStatLogger.record() (loggers.py:1140-1208): counters, per-iteration histograms,
        finished requests."""
        lv = (self.model_name, str(engine))
        external = it.num_external_prompt_tokens
        computed = it.num_prompt_tokens - it.num_cached_prompt_tokens - external
        self.preemptions.labels(*lv).inc(it.num_preempted_reqs)
        self.prompt_tokens.labels(*lv).inc(it.num_prompt_tokens)
        self.prompt_by_source.labels(*lv, "local_compute").inc(computed)
        self.prompt_by_source.labels(*lv, "local_cache_hit").inc(it.num_cached_prompt_tokens)
        self.prompt_by_source.labels(*lv, "external_kv_transfer").inc(external)
        self.prompt_cached.labels(*lv).inc(it.num_cached_prompt_tokens + external)
        self.generation_tokens.labels(*lv).inc(it.num_generation_tokens)
        self.iteration_tokens.labels(*lv).observe(computed + it.num_generation_tokens)
        for value in it.max_num_generation_tokens:
            self.req_max_num_generation_tokens.labels(*lv).observe(value)
        for n in it.n_params:
            self.req_params_n.labels(*lv).observe(n)
        for ttft in it.time_to_first_tokens:
            self.ttft.labels(*lv).observe(ttft)
        for itl in it.inter_token_latencies:
            self.itl.labels(*lv).observe(itl)
        for fin in it.finished:
            self.request_success.labels(*lv, fin.finish_reason).inc()
            self.e2e.labels(*lv).observe(fin.e2e_latency)
            self.queue_time.labels(*lv).observe(fin.queued_time)
            self.prefill_time.labels(*lv).observe(fin.prefill_time)
            self.inference_time.labels(*lv).observe(fin.inference_time)
            self.decode_time.labels(*lv).observe(fin.decode_time)
            self.prefill_kv_computed.labels(*lv).observe(fin.num_prompt_tokens - max(fin.num_cached_tokens, 0))
            self.req_prompt_tokens.labels(*lv).observe(fin.num_prompt_tokens)
            self.req_generation_tokens.labels(*lv).observe(fin.num_generation_tokens)
            self.req_tpot.labels(*lv).observe(fin.mean_time_per_output_token)
            if fin.max_tokens_param:
                self.req_params_max_tokens.labels(*lv).observe(fin.max_tokens_param)
        if self.num_spec_tokens > 0 and it.num_drafts:
            self.spec_drafts.labels(*lv).inc(it.num_drafts)
            self.spec_draft_tokens.labels(*lv).inc(it.num_draft_tokens)
            self.spec_accepted.labels(*lv).inc(it.num_accepted_tokens)
            for pos, count in enumerate(it.accepted_per_pos):
                if count:
                    self.spec_per_pos.labels(*lv, str(pos)).inc(count)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def cache_config_info(
    *,
    block_size: int,
    gpu_memory_utilization: float,
    enable_prefix_caching: bool,
    num_gpu_blocks: int,
    user_specified_block_size: bool = True,
    kv_cache_size_tokens: int | None = None,
    kv_cache_max_concurrency: float | None = None,
) -> dict[str, str]:
    """CacheConfig.metrics_info(): {field: str(value)} over every CacheConfig field (the contract's
    CACHE_CONFIG_LABELS, vllm/config/cache.py:49-238), upstream defaults where the simulator has no value."""
    values: dict[str, object] = {
        "block_size": block_size,
        "user_specified_block_size": user_specified_block_size,
        "user_specified_mamba_block_size": False,
        "gpu_memory_utilization": gpu_memory_utilization,
        "cache_dtype": "auto",
        "is_attention_free": False,
        "enable_prefix_caching": enable_prefix_caching,
        "prefix_caching_hash_algo": "sha256",
        "calculate_kv_scales": False,
        "kv_cache_dtype_skip_layers": [],
        "mamba_cache_dtype": "auto",
        "mamba_ssm_cache_dtype": "auto",
        "mamba_cache_mode": "none",
        "num_gpu_blocks": num_gpu_blocks,
        # both set once the KV cache is built (vllm/v1/engine/core.py:305-315), on every platform
        "kv_cache_size_tokens": kv_cache_size_tokens,
        "kv_cache_max_concurrency": kv_cache_max_concurrency,
        "kv_sharing_fast_prefill": False,
        "kv_offloading_backend": "native",
        "_block_size_resolved": True,
    }
    return {key: str(values.get(key)) for key in CACHE_CONFIG_LABELS}
