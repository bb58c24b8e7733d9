"""The stall detector, table-driven over traces shaped by the seed's figures."""

import itertools
from dataclasses import replace

import pytest

from ascend_operator.api.health import StallSpec
from ascend_operator.health.samples import EngineSample, RankSample
from ascend_operator.health.stall import detect_stall
from harness.traces import KV_POOL_DSA_CP, Trace, hang, long_prefill, stale_kv_after_abort, steady

CFG = StallSpec()


def first_stall(trace: Trace, cfg: StallSpec = CFG) -> float | None:
    """Replay the trace scrape by scrape; the time of the first stall verdict."""
    for i in range(1, len(trace)):
        if detect_stall(trace[: i + 1], cfg=cfg).stalled:
            return trace[i].t
    return None


@pytest.mark.parametrize(
    ("name", "trace"),
    [
        ("idle engine", steady(600, batch=0)),
        ("steady C32 decode", steady(600, batch=32)),
        ("C64 with 32 waiting", steady(600, batch=64)),
        ("300K prefill that completes", long_prefill(300_000)),
        ("512K prefill that completes", long_prefill(524_288)),
        ("stale 99% KV gauge after aborts", stale_kv_after_abort(600)),
    ],
)
def test_healthy_traces_never_stall(name: str, trace: Trace) -> None:
    assert first_stall(trace) is None, name


def test_512k_stall_at_975_kv_is_caught_within_45s_with_strong_evidence() -> None:
    trace = long_prefill(524_288, pool=KV_POOL_DSA_CP, stall_at_kv=0.975, tail=300)
    frozen_at = next(s.t for s, nxt in itertools.pairwise(trace) if s.kv_usage >= 0.975 and nxt.kv_usage >= 0.975)
    caught = first_stall(trace)
    assert caught is not None
    assert caught - frozen_at <= 45
    finding = detect_stall([s for s in trace if s.t <= caught], cfg=CFG)
    assert finding.reason == "Stalled"
    assert "the seed's 512K stall" in finding.message
    assert finding.evidence["kvUsage"] == pytest.approx(0.975)


def test_hang_under_load_is_caught_within_45s() -> None:
    caught = first_stall(hang(300, at=100))
    assert caught is not None
    assert 100 + CFG.window_seconds <= caught <= 100 + 45


def test_window_is_tunable() -> None:
    caught = first_stall(hang(300, at=100), StallSpec(window_seconds=10))
    assert caught is not None
    assert caught <= 115


def test_reasons_name_the_policy() -> None:
    idle = [EngineSample(t=0), EngineSample(t=5)]
    assert detect_stall(idle, cfg=CFG).reason == "Idle"
    assert detect_stall(idle[:1], cfg=CFG).reason == "InsufficientData"
    busy = steady(60, batch=4)
    assert detect_stall(busy, cfg=CFG).reason == "Progressing"


#: `--max-num-seqs` of the decode engines below.
SLOTS = 8


def decode_engine(
    seconds: int,
    *,
    waiting_for_kv: int,
    transfer_every: int | None,
    running: int = 4,
    generating: bool = True,
    full_until: int = -1,
) -> Trace:
    """A decode engine of a P/D pair scraped every 5 s: it decodes `running` requests (its counters advance
    every scrape unless not `generating`) while `waiting_for_kv` requests are `deferred`; a transfer completes
    every `transfer_every` s (None: never, the prefill side stopped serving pulls). Until `full_until` s every
    slot runs (running == SLOTS): vLLM's waiting loop then never runs (scheduler.py:640-645), so the deferred
    requests may hold KV that arrived and wait for a slot."""
    return [
        EngineSample(
            t=float(t),
            running=SLOTS if t <= full_until else running,
            waiting=waiting_for_kv,
            deferred=waiting_for_kv,
            generation_tokens=40.0 * t if generating else 0.0,
            iterations=10.0 * t if generating else 0.0,
            kv_usage=0.2,
            external_prompt_tokens=4096.0 * (t // transfer_every) if transfer_every else 0.0,
        )
        for t in range(0, seconds + 1, 5)
    ]


def first_decode_stall(trace: Trace, slots: int | None = SLOTS) -> float | None:
    for i in range(1, len(trace)):
        if detect_stall(trace[: i + 1], cfg=CFG, decode_slots=slots).stalled:
            return trace[i].t
    return None


#: (name, trace, decode slots (None: not a decode engine), stalled at (None: never), reason at the end)
DECODE_CASES = [
    ("transfers stopped while other requests decode", decode_engine(300, waiting_for_kv=3, transfer_every=None),
     SLOTS, CFG.window_seconds, "Stalled"),
    ("transfers complete every 20 s", decode_engine(300, waiting_for_kv=3, transfer_every=20), SLOTS, None,
     "Progressing"),
    ("nothing waits for KV", decode_engine(300, waiting_for_kv=0, transfer_every=None), SLOTS, None, "Progressing"),
    # vLLM counts grammar compiles, LoRA skips and paused streams as `deferred` too (scheduler.py:1854-1858,
    # 667-678): on an engine that pulls no KV they are no transfer
    ("deferred on an engine that is not a decode engine", decode_engine(300, waiting_for_kv=3,
     transfer_every=None), None, None, "Progressing"),
    # every slot taken for three windows and generating: the deferred requests' KV may well have arrived
    ("a full decode engine that generates", decode_engine(3 * 30, waiting_for_kv=5, transfer_every=None,
     full_until=3 * 30), SLOTS, None, "Progressing"),
    ("a full decode engine that generates nothing", decode_engine(300, waiting_for_kv=5, transfer_every=None,
     generating=False, full_until=300), SLOTS, CFG.window_seconds, "Stalled"),
    # a slot frees at 100 s and the deferred requests stay: their KV is not here; a window from then
    ("full, then a slot frees and nothing arrives", decode_engine(300, waiting_for_kv=3, transfer_every=None,
     full_until=100), SLOTS, 105 + CFG.window_seconds, "Stalled"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "trace", "slots", "stalls_at", "reason"), DECODE_CASES)
def test_a_decode_engine_is_judged_on_its_kv_transfers_while_a_slot_is_free(
    name: str, trace: Trace, slots: int | None, stalls_at: float | None, reason: str
) -> None:
    caught = first_decode_stall(trace, slots)
    if stalls_at is None:
        assert caught is None, name
    else:
        assert caught is not None, name
        assert stalls_at <= caught <= stalls_at + 5, name  # one scrape after the window
    assert detect_stall(trace, cfg=CFG, decode_slots=slots).reason == reason, name


def test_a_stuck_transfer_names_the_waiting_requests_and_the_free_slots() -> None:
    trace = decode_engine(300, waiting_for_kv=3, transfer_every=None)
    finding = detect_stall(trace, cfg=CFG, decode_slots=SLOTS)
    assert finding.message.startswith("3 request(s) waiting for their KV from a prefill engine")
    assert "4 of 8 running" in finding.message
    assert finding.evidence["waitingForKV"] == 3


def test_one_full_dp_rank_hides_which_deferred_requests_wait_for_a_slot() -> None:
    """max_num_seqs is each engine core's: with one DP rank full, its deferred requests may have their KV."""

    def dp2(rank0_running: int) -> Trace:
        return [
            replace(s, running=rank0_running + 2, ranks={
                "0": RankSample(running=rank0_running, generation_tokens=s.generation_tokens / 2),
                "1": RankSample(running=2, generation_tokens=s.generation_tokens / 2),
            })
            for s in decode_engine(300, waiting_for_kv=3, transfer_every=None)
        ]  # fmt: skip

    assert first_decode_stall(dp2(SLOTS)) is None
    assert first_decode_stall(dp2(SLOTS - 1)) == CFG.window_seconds


def test_a_transfer_that_completes_ends_the_wait() -> None:
    stuck = decode_engine(100, waiting_for_kv=2, transfer_every=None)
    arrived = [*stuck[:-1], EngineSample(t=stuck[-1].t, running=6, generation_tokens=1e6, iterations=1e5,
                                         external_prompt_tokens=8192.0, deferred=0.0)]  # fmt: skip
    assert detect_stall(arrived, cfg=CFG, decode_slots=SLOTS).reason == "Progressing"
