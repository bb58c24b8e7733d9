"""The bench's pure parts: prompt text, metric deltas, the four rules, the verdict and the table.

A user notices these as: a reused prompt flagged, a short completion refused, a restarted engine refused,
a missing figure refused, and TTFT quantiles that match Prometheus' histogram_quantile.
"""

from __future__ import annotations

from typing import Any

import pytest

from ascend_operator.bench import snapshots as m
from ascend_operator.bench.prompts import chars_for, make_text, parse_tokens, prompt_key, refine, within
from ascend_operator.bench.report import finalize, markdown, missing_fields
from ascend_operator.bench.rules import Batch, Clock, RequestRecord, Thresholds, summarize

HELP = """# HELP vllm:x x
"""


def scrape(
    *,
    success: int,
    gen: int,
    ttft_sum: float,
    ttft_buckets: dict[str, int],
    tpot_sum: float,
    queries: int = 0,
    hits: int = 0,
    preempt: int = 0,
    kv: float = 0.0,
    start: float | None = None,
) -> m.Snapshot:
    lab = 'model_name="m",engine="0"'
    lines = [
        "# TYPE vllm:request_success counter",
        f'vllm:request_success_total{{{lab},finished_reason="length"}} {success}',
        "# TYPE vllm:generation_tokens counter",
        f"vllm:generation_tokens_total{{{lab}}} {gen}",
        "# TYPE vllm:prefix_cache_queries counter",
        f"vllm:prefix_cache_queries_total{{{lab}}} {queries}",
        "# TYPE vllm:prefix_cache_hits counter",
        f"vllm:prefix_cache_hits_total{{{lab}}} {hits}",
        "# TYPE vllm:num_preemptions counter",
        f"vllm:num_preemptions_total{{{lab}}} {preempt}",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{lab}}} {kv}",
        "# TYPE vllm:time_to_first_token_seconds histogram",
        *(f'vllm:time_to_first_token_seconds_bucket{{{lab},le="{le}"}} {n}' for le, n in ttft_buckets.items()),
        f"vllm:time_to_first_token_seconds_count{{{lab}}} {ttft_buckets['+Inf']}",
        f"vllm:time_to_first_token_seconds_sum{{{lab}}} {ttft_sum}",
        "# TYPE vllm:request_time_per_output_token_seconds histogram",
        f'vllm:request_time_per_output_token_seconds_bucket{{{lab},le="+Inf"}} {success}',
        f"vllm:request_time_per_output_token_seconds_count{{{lab}}} {success}",
        f"vllm:request_time_per_output_token_seconds_sum{{{lab}}} {tpot_sum}",
        "# TYPE vllm:cache_config_info gauge",
        'vllm:cache_config_info{block_size="128",enable_prefix_caching="True",engine="0"} 1.0',
    ]
    if start is not None:
        lines += ["# TYPE process_start_time_seconds gauge", f"process_start_time_seconds {start}"]
    return m.parse_metrics("\n".join(lines) + "\n")


BEFORE = scrape(success=10, gen=5000, ttft_sum=10.0, ttft_buckets={"1.0": 5, "2.0": 10, "+Inf": 10}, tpot_sum=0.2)


def after(**kw: Any) -> m.Snapshot:
    base: dict[str, Any] = {
        "success": 14,
        "gen": 5000 + 4 * 512,
        "ttft_sum": 10.0 + 4 * 1.5,
        "ttft_buckets": {"1.0": 5, "2.0": 14, "+Inf": 14},
        "tpot_sum": 0.2 + 4 * 0.05,
        "queries": 4 * 1024,
    }
    return scrape(**{**base, **kw})


def rec(i: int, **kw: Any) -> RequestRecord:
    base: dict[str, Any] = {
        "index": i,
        "kind": "short",
        "prompt_tokens_requested": 1024,
        "max_tokens": 512,
        "ok": True,
        "prompt_tokens": 1030,
        "completion_tokens": 512,
        "cached_tokens": 0,
        "ttft_s": 0.02,
        "latency_s": 0.3,
        "decode_s": 0.28,
    }
    return RequestRecord(**{**base, **kw})


def batch(records: list[RequestRecord] | None = None, **kw: Any) -> Batch:
    base: dict[str, Any] = {
        "endpoint": "engine",
        "label": "C4",
        "concurrency": 4,
        "context": 1024,
        "records": records if records is not None else [rec(i) for i in range(4)],
        "before": BEFORE,
        "after": after(),
        "wall_s": 0.4,
        "clock": Clock("aissim", 100.0),
        "busy_s": {"0": 32.0},
        "kv_peak": 0.25,
        "running_peak": 4.0,
    }
    return Batch(**{**base, **kw})


def failed_checks(point: dict[str, Any]) -> list[str]:
    return [c["name"] for c in point["checks"] if not c["ok"]]


def test_prompts_are_fresh_per_key_and_repeat_for_the_same_key() -> None:
    a, b = make_text(prompt_key(7, "sweep", 8, 0), 4000), make_text(prompt_key(7, "sweep", 8, 1), 4000)
    assert len(a) == len(b) == 4000
    assert a[:64] != b[:64]  # distinct from the first block on: no shared prefix to hit
    assert make_text(prompt_key(7, "sweep", 8, 0), 4000) == a  # a reused seed reuses the prompt


def test_calibration_and_token_parsing() -> None:
    assert refine(chars_sent=4096, tokens_measured=1024) == 4.0
    assert chars_for(1000, 4.2) == 4200
    assert within(1030, 1024, 0.05)
    assert not within(1100, 1024, 0.05)
    assert [parse_tokens(t) for t in ("8k", "300K", "1500", "1m")] == [8192, 307200, 1500, 1048576]
    with pytest.raises(ValueError, match="positive"):
        parse_tokens("0")


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    h = m.histogram_delta(BEFORE, after(), m.TTFT)
    assert (h.count, h.sum, h.mean) == (4.0, 6.0, 1.5)
    assert h.quantile(0.5) == pytest.approx(1.5)  # 4 new observations, all in (1, 2]
    assert h.quantile(0.99) == pytest.approx(1.99)


def test_counter_reset_and_process_restart_are_found() -> None:
    restarted = scrape(success=2, gen=100, ttft_sum=1.0, ttft_buckets={"1.0": 2, "2.0": 2, "+Inf": 2}, tpot_sum=0.1)
    found = m.resets(BEFORE, restarted)
    assert any(f.startswith("vllm:request_success_total") for f in found)
    assert m.resets(BEFORE, after()) == []
    s0 = scrape(success=1, gen=1, ttft_sum=1, ttft_buckets={"+Inf": 1}, tpot_sum=0, start=1000.0)
    s1 = scrape(success=1, gen=1, ttft_sum=1, ttft_buckets={"+Inf": 1}, tpot_sum=0, start=2000.0)
    assert m.resets(s0, s1) == ["process_start_time_seconds 1000 -> 2000"]


def test_cache_config_reads_the_info_labels() -> None:
    assert m.cache_config(BEFORE) == {"block_size": "128", "enable_prefix_caching": "True"}


def test_clean_point_passes_with_engine_and_client_figures() -> None:
    point = summarize(batch(), Thresholds())
    assert failed_checks(point) == []
    assert point["ok"] is True
    assert point["output_tok_s"] == 64.0  # 2048 tokens over 32 busy engine seconds
    assert point["engine"] == {
        "ttft_mean_s": 1.5,
        "ttft_p50_s": 1.5,
        "ttft_p99_s": 1.99,
        "tpot_mean_s": 0.05,
        "finished": 4,
        "finished_length": 4,
        "prefix_cache_queries": 4096,
        "prefix_cache_hits": 0,
        "prefix_cache_hit_rate": 0.0,
        "preemptions": 0,
        "kv_peak": 0.25,
        "running_peak": 4.0,
    }
    # Client wall seconds x the simulator's time scale.
    assert point["client"] == {"ttft_mean_s": 2.0, "ttft_p99_s": 2.0, "tpot_mean_s": 0.05479, "latency_mean_s": 30.0}
    assert point["engine_s"] == 40.0


def test_wall_clock_throughput_for_a_real_engine() -> None:
    point = summarize(batch(clock=Clock("wall"), busy_s=None, wall_s=2.0), Thresholds())
    assert point["output_tok_s"] == 1024.0


def test_reused_prompts_are_flagged_cache_contaminated() -> None:
    point = summarize(batch(after=after(hits=4 * 1000)), Thresholds())
    assert failed_checks(point) == ["prefix_cache_clean"]
    detail = next(c["detail"] for c in point["checks"] if c["name"] == "prefix_cache_clean")
    assert "cache-contaminated" in detail


def test_short_completion_breaks_fixed_output() -> None:
    records = [rec(0), rec(1, completion_tokens=300), rec(2), rec(3)]
    assert failed_checks(summarize(batch(records), Thresholds())) == ["fixed_output"]


def test_prompt_off_its_requested_length_fails() -> None:
    records = [rec(0, prompt_tokens=900), rec(1), rec(2), rec(3)]
    assert failed_checks(summarize(batch(records), Thresholds())) == ["prompt_length"]


def test_failed_request_and_missing_engine_count_fail() -> None:
    records = [rec(0), rec(1), rec(2), rec(3, ok=False, error="HTTP 500: boom")]
    point = summarize(batch(records, after=after(success=13)), Thresholds())
    assert failed_checks(point) == ["requests_succeeded"]  # the engine finished the 3 the client saw complete
    point = summarize(batch(records, after=after(success=12)), Thresholds())
    assert failed_checks(point) == ["requests_succeeded", "engine_finished"]


def test_a_client_abort_is_counted_by_the_client_not_expected_from_the_engine() -> None:
    """vLLM 0.25.1 never counts a request the client gave up on in vllm:request_success: the engine's count
    equal to the completed requests is right, and the abort shows as the client's."""
    records = [rec(0), rec(1), rec(2), rec(3, ok=False, error="TimeoutError: ", aborted=True)]
    point = summarize(batch(records, after=after(success=13)), Thresholds())
    assert failed_checks(point) == ["requests_succeeded"]
    assert point["aborted"] == 1
    detail = next(c["detail"] for c in point["checks"] if c["name"] == "engine_finished")
    assert detail == (
        "engine finished 3 (length: 3) of the 3 the client saw complete; 1 aborted by the client, which vLLM "
        "does not count"
    )


def test_an_engine_counting_more_than_the_client_saw_complete_fails() -> None:
    """A finished request the client never saw complete (e.g. an engine that counts client aborts, or an
    engine error after the stream broke) is not taken as a success."""
    records = [rec(0), rec(1), rec(2), rec(3, ok=False, error="TimeoutError: ", aborted=True)]
    point = summarize(batch(records, after=after(success=14)), Thresholds())
    assert failed_checks(point) == ["requests_succeeded", "engine_finished"]


def test_engine_gone_after_the_run_fails_every_engine_rule() -> None:
    records = [rec(0), rec(1, ok=False, error="ServerDisconnectedError")]
    point = summarize(batch(records, after=None, scrape_error="ClientConnectorError"), Thresholds())
    assert failed_checks(point) == ["requests_succeeded", "no_engine_restart", "engine_finished", "prefix_cache_clean"]


def test_restart_between_scrapes_fails() -> None:
    restarted = scrape(success=4, gen=2048, ttft_sum=6.0, ttft_buckets={"1.0": 0, "2.0": 4, "+Inf": 4}, tpot_sum=0.2)
    assert "no_engine_restart" in failed_checks(summarize(batch(after=restarted), Thresholds()))


def doc(points: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "schema": "bench.ascend.dev/v1",
        "scenario": "sweep",
        "seed": 7,
        "started_at": "t0",
        "finished_at": "t1",
        "endpoints": {"engine": {"models": ["m"]}},
        "points": points,
    }


def test_verdict_pass_needs_every_check_and_a_complete_result() -> None:
    good = summarize(batch(), Thresholds())
    assert finalize(doc([good]))["verdict"] == "PASS"
    contaminated = summarize(batch(after=after(hits=4000)), Thresholds())
    final = finalize(doc([good, contaminated]))
    assert (final["verdict"], final["failed"]) == ("FAIL", ["C4:prefix_cache_clean"])
    empty = finalize(doc([]))
    assert empty["verdict"] == "FAIL"
    assert "points (none measured)" in missing_fields(empty)
    broken = summarize(batch(after=None, scrape_error="gone"), Thresholds())
    assert "points[0].output_tok_s" in missing_fields(doc([broken]))


def test_markdown_has_a_row_per_point_and_the_verdict() -> None:
    text = markdown(finalize(doc([summarize(batch(), Thresholds())])))
    row = next(line for line in text.splitlines() if line.startswith("| engine | C4 |"))
    assert "| 64.0 |" in row
    assert "1.50 s / 1.99 s" in row
    assert "50.0 ms" in row
    assert row.endswith("| ok |")
    assert "**PASS** (sweep, seed 7)" in text
