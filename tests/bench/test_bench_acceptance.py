"""The seed's criteria for its mixed workload (bench/acceptance.py): each judged against the same engine's own
baselines, and the timeline the plot draws.

What a user notices: `aisctl bench mixed --baseline` says, per criterion, met or MISSED and by how much
(short TTFT p99 within 3x the short workers alone, the long request's decode >= 50 tok/s and completion
within 15% of alone, no preemption), and says nothing is judged when no baseline was run.
"""

from __future__ import annotations

from dataclasses import replace

from ascend_operator.bench.acceptance import criteria, lines, timeline
from ascend_operator.bench.rules import RequestRecord

MIX = {"short_ttft_p50_s": 2.0, "short_ttft_p99_s": 9.0, "long_latency_s": 110.0, "long_decode_tok_s": 52.0,
       "preemptions": 0, "kv_peak": 0.61}  # fmt: skip


def test_each_criterion_is_judged_against_its_baseline() -> None:
    got = criteria(MIX, idle={"short_ttft_p50_s": 1.0, "short_ttft_p99_s": 3.0}, alone={"long_latency_s": 100.0})
    assert (got["short_ttft_p99_vs_idle"], got["short_ttft_ok"]) == (3.0, True)  # exactly 3x holds
    assert (got["long_completion_vs_alone"], got["long_completion_ok"]) == (1.1, True)
    assert (got["long_decode_ok"], got["no_preemption_ok"], got["kv_peak"], got["all_met"]) == (True, True, 0.61, True)


def test_one_missed_criterion_fails_the_whole_and_is_named() -> None:
    slow = criteria({**MIX, "long_latency_s": 116.0}, idle={"short_ttft_p99_s": 3.0}, alone={"long_latency_s": 100.0})
    assert (slow["long_completion_ok"], slow["all_met"]) == (False, False)
    preempted = criteria({**MIX, "preemptions": 1}, idle={"short_ttft_p99_s": 3.0}, alone={"long_latency_s": 100.0})
    assert (preempted["no_preemption_ok"], preempted["all_met"]) == (False, False)
    text = "\n".join(lines("engine", {**MIX, "long_latency_s": 116.0, "criteria": slow}))
    assert "1.16x (<= 1.15x) MISSED" in text
    assert "3.0x (<= 3x) met" in text


def test_without_a_baseline_nothing_relative_is_judged() -> None:
    got = criteria(MIX, idle=None, alone=None)
    assert (got["short_ttft_ok"], got["long_completion_ok"], got["all_met"]) == (None, None, None)
    assert got["long_decode_ok"] is True  # an absolute target needs no baseline


def test_the_timeline_is_in_engine_seconds_from_the_point_start() -> None:
    base = RequestRecord(index=0, kind="short", prompt_tokens_requested=1024, max_tokens=8, ok=True)
    records = [
        replace(base, kind="long", sent_at=100.0, ttft_s=2.0, latency_s=5.0, chunk_times=(102.0, 103.0, 105.0)),
        replace(base, index=1, sent_at=100.5, ttft_s=0.25),
        replace(base, index=2, sent_at=101.0, ttft_s=None, ok=False),  # failed: not drawn
    ]
    got = timeline(records, t0=100.0, scale=10.0)
    assert got["shorts"] == [[5.0, 2.5]]
    long = got["long"]
    assert (long["sent_s"], long["first_token_s"], long["end_s"], long["chunks"]) == (0.0, 20.0, 50.0, 3)
    assert long["progress"] == [[20.0, 0.3333], [30.0, 0.6667], [50.0, 1.0]]


def test_aissim_requests_are_timed_on_the_engine_clock_not_by_the_clients_reading() -> None:
    from ascend_operator.bench.runner import rebase

    late = RequestRecord(index=0, kind="long", prompt_tokens_requested=1024, max_tokens=4, ok=True, sent_at=10.0,
                         ttft_s=3.0, latency_s=9.0, decode_s=6.0, chunk_times=(13.0, 19.0))  # fmt: skip
    times = {"arrival_s": 50.0, "first_token_s": 60.0, "last_token_s": 70.0, "finished": True,
             "remote_prefill": False, "emits": [[60.0, 1], [62.0, 3], [70.0, 4]]}  # fmt: skip
    got = rebase(late, 40.0, times, t0=10.0, scale=10.0)  # engine second 40 was wall second 10
    assert (got.sent_at, got.ttft_s, got.latency_s, got.decode_s, got.max_gap_s) == (11.0, 1.0, 2.0, 1.0, 0.8)
    assert (got.chunk_times, got.engine_clock) == ((12.0, 12.2, 13.0), True)
    # A P/D decode request arrived at its decode engine after its prefill elsewhere: the client's view stays.
    assert rebase(late, 40.0, {**times, "remote_prefill": True}, t0=10.0, scale=10.0) == late
