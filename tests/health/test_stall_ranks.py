"""Per-rank stall detection over vLLM /metrics text: one stalled DP rank among progressing ones is a stall.

The text has vLLM 0.25.1's shape: every series labelled `model_name` and `engine` = DP rank
(vllm/v1/metrics/loggers.py:431-437), counters with `_total`, the iteration histogram with `_count`. Each
case is a trace of scrapes every 5 s; a rank either advances (its counters grow) or freezes at a given time.
"""

from dataclasses import dataclass

import pytest

from ascend_operator.api.health import HealthSpec, StallSpec
from ascend_operator.disruption import RollReason
from ascend_operator.health.judge import PodHealth, fold_sample, judge
from ascend_operator.health.samples import EngineSample, RankSample, parse_metrics
from ascend_operator.health.stall import detect_stall

CFG = StallSpec(window_seconds=30.0)
STEP = 5.0


@dataclass(frozen=True)
class Rank:
    """How one rank behaves over the trace."""

    running: float = 2
    waiting: float = 0
    frozen_at: float | None = None
    """From this time on its counters and KV gauge stop; None: it advances throughout."""
    prefill_only: bool = False
    """A lone chunked prefill: no counter moves, only the KV gauge climbs (loggers.py:1086)."""


def exposition(ranks: dict[str, Rank], t: float) -> str:
    lines = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
    ]
    rows: dict[str, list[str]] = {
        "running": [], "waiting": [], "kv": [], "gen": [], "prompt": [], "iter_count": [], "iter_sum": [],
    }  # fmt: skip
    for engine, rank in ranks.items():
        moving = t if rank.frozen_at is None else min(t, rank.frozen_at)
        labels = f'engine="{engine}",model_name="m"'
        gen = 0.0 if rank.prefill_only else moving * 40
        kv = min(0.9, 0.05 + moving * 0.002)
        rows["running"].append(f"vllm:num_requests_running{{{labels}}} {rank.running}")
        rows["waiting"].append(f"vllm:num_requests_waiting{{{labels}}} {rank.waiting}")
        rows["kv"].append(f"vllm:kv_cache_usage_perc{{{labels}}} {kv}")
        rows["gen"].append(f"vllm:generation_tokens_total{{{labels}}} {gen}")
        rows["prompt"].append(f"vllm:prompt_tokens_total{{{labels}}} {0.0 if rank.prefill_only else moving * 10}")
        rows["iter_count"].append(f"vllm:iteration_tokens_total_count{{{labels}}} {gen / 4}")
        rows["iter_sum"].append(f"vllm:iteration_tokens_total_sum{{{labels}}} {gen}")
    lines += rows["running"]
    lines += ["# TYPE vllm:num_requests_waiting gauge", *rows["waiting"]]
    lines += ["# TYPE vllm:kv_cache_usage_perc gauge", *rows["kv"]]
    lines += ["# TYPE vllm:generation_tokens_total counter", *rows["gen"]]
    lines += ["# TYPE vllm:prompt_tokens_total counter", *rows["prompt"]]
    lines += ["# TYPE vllm:iteration_tokens_total histogram", *rows["iter_count"], *rows["iter_sum"]]
    return "\n".join(lines) + "\n"


def trace(ranks: dict[str, Rank], until: float) -> list[EngineSample]:
    count = int(until / STEP) + 1
    return [parse_metrics(exposition(ranks, i * STEP), t=i * STEP) for i in range(count)]


def test_each_rank_keeps_its_own_series() -> None:
    sample = parse_metrics(exposition({"0": Rank(running=3, waiting=1), "1": Rank(running=0)}, 10.0), t=10.0)
    assert sample.ranks == {
        "0": RankSample(running=3, waiting=1, kv_usage=0.07, prompt_tokens=100, generation_tokens=400, iterations=100),
        "1": RankSample(running=0, waiting=0, kv_usage=0.07, prompt_tokens=100, generation_tokens=400, iterations=100),
    }
    # the engine-wide figures are still the sums (gauges of usage the fullest rank)
    assert (sample.running, sample.waiting, sample.generation_tokens, sample.kv_usage) == (3, 1, 800, 0.07)


ADVANCING = {str(i): Rank() for i in range(4)}


@pytest.mark.parametrize(
    ("case", "ranks", "stalled", "message"),
    [
        ("every rank advances", ADVANCING, None, None),
        (
            "rank 2 of 4 frozen with requests: the sum still moves",
            {**ADVANCING, "2": Rank(running=3, frozen_at=20)},
            ("2",),
            "DP rank 2 of 4: 3 request(s) running, 0 waiting and no forward progress for 100s (the other 3 advance)",
        ),
        (
            "a worker's ranks 2 and 3 frozen",
            {**ADVANCING, "2": Rank(frozen_at=20), "3": Rank(running=1, waiting=2, frozen_at=20)},
            ("2", "3"),
            "DP ranks 2, 3 of 4: 3 request(s) running, 2 waiting and no forward progress for 100s "
            "(the other 2 advance)",
        ),
        (
            "rank with only waiting requests frozen",
            {**ADVANCING, "1": Rank(running=0, waiting=4, frozen_at=20)},
            ("1",),
            "DP rank 1 of 4: 0 request(s) running, 4 waiting and no forward progress for 100s (the other 3 advance)",
        ),
        ("frozen rank with nothing asked is idle", {**ADVANCING, "2": Rank(running=0, frozen_at=20)}, None, None),
        ("frozen for less than the window", {**ADVANCING, "2": Rank(frozen_at=100)}, None, None),
        ("a rank in a lone chunked prefill moves only KV", {**ADVANCING, "3": Rank(prefill_only=True)}, None, None),
        (
            "every rank frozen (a lost peer of an expert-parallel group)",
            {str(i): Rank(frozen_at=20) for i in range(4)},
            ("0", "1", "2", "3"),
            "DP ranks 0, 1, 2, 3 of 4: 8 request(s) running, 0 waiting and no forward progress for 100s "
            "(every rank is frozen)",
        ),
    ],
)
def test_a_stalled_rank_stalls_the_engine_and_is_named(
    case: str, ranks: dict[str, Rank], stalled: tuple[str, ...] | None, message: str | None
) -> None:
    samples = trace(ranks, until=120)
    finding = detect_stall(samples, cfg=CFG)
    assert finding.stalled is (stalled is not None), (case, finding)
    if stalled is not None:
        assert (finding.reason, finding.ranks, finding.message) == ("Stalled", stalled, message)
        assert finding.evidence["stalledRanks"] == len(stalled)
    else:
        assert finding.ranks == ()


def test_one_rank_is_judged_as_the_engine() -> None:
    samples = trace({"0": Rank(running=2, frozen_at=20)}, until=120)
    finding = detect_stall(samples, cfg=CFG)
    assert (finding.stalled, finding.ranks) == (True, ())
    assert finding.message.startswith("2 request(s) running, 0 waiting and no forward progress for 100s")


def test_canary_failures_stay_in_the_evidence_of_a_rank_stall() -> None:
    samples = trace({str(i): Rank(frozen_at=20) for i in range(2)}, until=120)
    finding = detect_stall(samples, cfg=CFG, canary_failures=2)
    assert finding.ranks == ("0", "1")
    assert finding.evidence["canaryFailures"] == 2


def test_a_rank_stall_is_caught_within_the_window_of_its_freeze() -> None:
    ranks = {**ADVANCING, "2": Rank(frozen_at=50)}
    samples = trace(ranks, until=200)
    first = next(s.t for i, s in enumerate(samples) if detect_stall(samples[: i + 1], cfg=CFG).stalled)
    assert 50 + CFG.window_seconds <= first <= 50 + CFG.window_seconds + STEP


def test_the_pod_verdict_carries_the_stalled_ranks_for_the_group() -> None:
    state = PodHealth(mismatches=(), served=True)
    cfg = HealthSpec(stall=CFG, scrape_interval_seconds=STEP)
    for sample in trace({**ADVANCING, "3": Rank(frozen_at=20)}, until=120):
        state = fold_sample(state, sample, cfg=cfg)
    verdict = judge(state, now=120, cfg=cfg)
    assert (verdict.reason, verdict.roll, verdict.ranks) == ("Stalled", RollReason.STALLED, ("3",))
    assert verdict.message.startswith("DP rank 3 of 4: ")
