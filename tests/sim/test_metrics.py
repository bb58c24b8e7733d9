"""/metrics carries vLLM V1's exact series (names, types, labels), as a health checker reads them.

Reference: vllm/v1/metrics/loggers.py (PrometheusStatLogger) and vllm/v1/spec_decode/metrics.py.
"""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ascend_operator.contract.vllm_metrics import CACHE_CONFIG_LABELS
from tests.sim.conftest import MODEL, SimFactory, base_args

COUNTERS = {
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:num_preemptions",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:request_success",
}
GAUGES = {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"}
HISTOGRAMS = {
    "vllm:iteration_tokens_total",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
}
SPEC = {
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
}


async def test_series_have_vllm_names_types_and_labels(sim: SimFactory) -> None:
    s = await sim(base_args())
    await s.complete(prompt="warm up " * 50, max_tokens=30, ignore_eos=True)
    families = {f.name: f for f in text_string_to_metric_families(await s.metrics_text())}
    for name in COUNTERS | SPEC:
        assert families[name].type == "counter", name
        assert any(sample.name == name + "_total" for sample in families[name].samples), name
    for name in GAUGES:
        assert families[name].type == "gauge", name
    for name in HISTOGRAMS:
        assert families[name].type == "histogram", name
        assert {sample.name for sample in families[name].samples} >= {name + "_bucket", name + "_sum"}
    for name in COUNTERS | GAUGES | HISTOGRAMS | SPEC:
        for sample in families[name].samples:
            assert sample.labels["model_name"] == MODEL
            assert sample.labels["engine"] == "0"
    success = {s.labels["finished_reason"]: s.value for s in families["vllm:request_success"].samples}
    assert success["length"] == 1
    positions = [
        sample.labels["position"]
        for sample in families["vllm:spec_decode_num_accepted_tokens_per_pos"].samples
        if sample.name.endswith("_total")
    ]
    assert positions == [str(i) for i in range(7)]
    ttft_buckets = [
        sample.labels["le"]
        for sample in families["vllm:time_to_first_token_seconds"].samples
        if sample.name.endswith("_bucket")
    ]
    assert ttft_buckets[:3] == ["0.001", "0.005", "0.01"]
    assert ttft_buckets[-2:] == ["2560.0", "+Inf"]


async def test_cache_config_info_exposes_the_effective_cache_config(sim: SimFactory) -> None:
    s = await sim(base_args("--gpu-memory-utilization", "0.9"))
    families = {f.name: f for f in text_string_to_metric_families(await s.metrics_text())}
    info = families["vllm:cache_config_info"]
    assert info.type == "gauge"
    (sample,) = info.samples
    assert sample.value == 1
    # DeepSeek-V4 on vllm-ascend at --block-size 128: KV cache groups of 128, 128, 8 and 32 tokens, and vLLM
    # reports the smallest (vllm/v1/engine/core.py:305-311); the pool keeps its 128-token blocks.
    assert sample.labels["block_size"] == "8"
    assert sample.labels["user_specified_block_size"] == "True"
    assert sample.labels["kv_cache_size_tokens"] == "1078120"
    assert sample.labels["gpu_memory_utilization"] == "0.9"
    assert sample.labels["enable_prefix_caching"] == "True"
    assert sample.labels["num_gpu_blocks"] == str(1_078_120 // 128)
    assert sample.labels["engine"] == "0"
    assert "model_name" not in sample.labels  # vLLM's info gauge carries the config's fields only
    assert set(sample.labels) == {*CACHE_CONFIG_LABELS, "engine"}  # vLLM's CacheConfig fields + engine


async def test_cache_config_info_gives_the_max_concurrency_of_its_own_pool(sim: SimFactory) -> None:
    """kv_cache_max_concurrency is set on every platform once the KV cache is built (vllm/v1/engine/core.py
    305-315): the pool's blocks over the blocks one max_model_len request takes (kv_cache_utils.py:919-937)."""
    concurrency = {}
    for max_model_len in ("327680", "163840", "100000"):
        argv = base_args()
        argv[argv.index("--max-model-len") + 1] = max_model_len
        s = await sim(argv)
        engines = (await s.state())["engines"]
        assert isinstance(engines, list)
        (engine,) = engines
        families = {f.name: f for f in text_string_to_metric_families(await s.metrics_text())}
        (sample,) = families["vllm:cache_config_info"].samples
        value = float(sample.labels["kv_cache_max_concurrency"])
        assert value == engine["kv_blocks_total"] / -(-int(max_model_len) // 128)
        concurrency[max_model_len] = value
    assert concurrency["163840"] == 2 * concurrency["327680"]  # half the length, twice the requests
    assert 1 < concurrency["327680"] < 2  # DeepSeek-V4's hybrid KV: ~2 pool tokens per context token


async def test_no_spec_decode_series_without_a_speculative_config(sim: SimFactory) -> None:
    s = await sim(base_args(spec=False))
    await s.complete(max_tokens=5, ignore_eos=True)
    names = {f.name for f in text_string_to_metric_families(await s.metrics_text())}
    assert not names & SPEC
    assert "vllm:generation_tokens" in names


async def test_per_position_acceptance_follows_the_real_traffic_profile(sim: SimFactory) -> None:
    s = await sim(base_args("--sim-acceptance-profile", "real"))
    for i in range(4):
        await s.complete(prompt=f"reasoning {i}", max_tokens=400, ignore_eos=True)
    totals = await s.totals()
    drafts = totals["vllm:spec_decode_num_drafts_total"]
    assert totals["vllm:spec_decode_num_draft_tokens_total"] == 7 * drafts
    families = {f.name: f for f in text_string_to_metric_families(await s.metrics_text())}
    per_pos = [
        sample.value
        for sample in families["vllm:spec_decode_num_accepted_tokens_per_pos"].samples
        if sample.name.endswith("_total")
    ]
    assert sum(per_pos) == totals["vllm:spec_decode_num_accepted_tokens_total"]
    seed_rates = (0.532, 0.291, 0.164, 0.098, 0.063, 0.041, 0.024)  # docs/FACTS.md per-position acceptance
    for got, want in zip(per_pos, seed_rates, strict=True):
        assert abs(got / drafts - want) < 0.03
    length = 1 + totals["vllm:spec_decode_num_accepted_tokens_total"] / drafts
    assert length == pytest.approx(2.214, abs=0.1)  # docs/FACTS.md: mean acceptance length 2.214


async def test_data_parallel_engines_are_labelled_separately(sim: SimFactory) -> None:
    s = await sim(base_args("--data-parallel-size", "2", "--tensor-parallel-size", "4", spec=False))
    for i in range(4):
        await s.complete(prompt=f"p{i}", max_tokens=3, ignore_eos=True)
    families = {f.name: f for f in text_string_to_metric_families(await s.metrics_text())}
    engines = {x.labels["engine"] for x in families["vllm:generation_tokens"].samples}
    assert engines == {"0", "1"}
    info_engines = {x.labels["engine"] for x in families["vllm:cache_config_info"].samples}
    assert info_engines == {"0", "1"}


async def test_the_families_vllm_0_25_1_adds_by_default_are_there_and_move_when_vllm_moves_them(
    sim: SimFactory,
) -> None:
    s = await sim(base_args("--enable-prompt-tokens-details"))
    prompt = "a shared system prompt " * 100  # ~575 tokens: four full 128-token blocks to cache
    await s.complete(prompt=prompt, max_tokens=4, ignore_eos=True)
    await s.complete(prompt=prompt, max_tokens=4, ignore_eos=True)
    families = {f.name: f for f in text_string_to_metric_families(await s.metrics_text())}
    kinds = {
        "vllm:num_requests_waiting_by_reason": ("gauge", "reason"),
        "vllm:engine_sleep_state": ("gauge", "sleep_state"),
        "vllm:prompt_tokens_by_source": ("counter", "source"),
        "vllm:prompt_tokens_cached": ("counter", None),
        "vllm:request_prefill_kv_computed_tokens": ("histogram", None),
        "vllm:external_prefix_cache_queries": ("counter", None),
        "vllm:external_prefix_cache_hits": ("counter", None),
        "vllm:mm_cache_queries": ("counter", None),
        "vllm:mm_cache_hits": ("counter", None),
        "vllm:estimated_flops_per_gpu": ("counter", None),
        "vllm:estimated_read_bytes_per_gpu": ("counter", None),
        "vllm:estimated_write_bytes_per_gpu": ("counter", None),
    }
    for name, (kind, extra) in kinds.items():
        assert families[name].type == kind, name
        for sample in families[name].samples:
            assert set(sample.labels) - {"le"} == {"model_name", "engine", *([extra] if extra else [])}, name

    def value(sample: str, **labels: str) -> float:
        family = families[sample.removesuffix("_total")]
        return sum(x.value for x in family.samples if x.name == sample and labels.items() <= x.labels.items())

    totals = await s.totals()
    assert value("vllm:engine_sleep_state", sleep_state="awake") == 1
    assert value("vllm:engine_sleep_state", sleep_state="discard_all") == 0
    assert {x.labels["reason"] for x in families["vllm:num_requests_waiting_by_reason"].samples} == {
        "capacity",
        "deferred",
    }
    cached = totals["vllm:prompt_tokens_cached_total"]
    assert cached == 512  # the second request's four full blocks (stats.py:304-311)
    assert value("vllm:prompt_tokens_by_source_total", source="local_cache_hit") == cached
    assert value("vllm:prompt_tokens_by_source_total", source="external_kv_transfer") == 0
    computed = value("vllm:prompt_tokens_by_source_total", source="local_compute")
    assert computed + cached == totals["vllm:prompt_tokens_total"]
    # per request: prompt minus its cached tokens (loggers.py:1186-1191); per step: computed + generated
    assert totals["vllm:request_prefill_kv_computed_tokens_sum"] == computed
    assert totals["vllm:iteration_tokens_total_sum"] == computed + totals["vllm:generation_tokens_total"]
    for zero in ("vllm:external_prefix_cache_queries_total", "vllm:mm_cache_queries_total"):
        assert totals[zero] == 0
    assert totals["vllm:estimated_flops_per_gpu_total"] == 0  # only --enable-mfu-metrics feeds it
