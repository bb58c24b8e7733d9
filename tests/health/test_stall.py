"""The stall detector, table-driven over traces shaped by the seed's figures."""

import itertools

import pytest

from ascend_operator.api.health import StallSpec
from ascend_operator.health.samples import EngineSample
from ascend_operator.health.stall import detect_stall
from harness.traces import KV_POOL_DSA_CP, Trace, hang, long_prefill, stale_kv_after_abort, steady

CFG = StallSpec()


def first_stall(trace: Trace, cfg: StallSpec = CFG) -> float | None:
    """Replay the trace scrape by scrape; the time of the first stall verdict."""
    for i in range(1, len(trace)):
        if detect_stall(trace[: i + 1], now=trace[i].t, cfg=cfg).stalled:
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
    finding = detect_stall([s for s in trace if s.t <= caught], now=caught, cfg=CFG)
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
    assert detect_stall(idle, now=5, cfg=CFG).reason == "Idle"
    assert detect_stall(idle[:1], now=5, cfg=CFG).reason == "InsufficientData"
    busy = steady(60, batch=4)
    assert detect_stall(busy, now=busy[-1].t, cfg=CFG).reason == "Progressing"


def decode_engine(seconds: int, *, waiting_for_kv: int, transfer_every: int | None) -> Trace:
    """A decode engine of a P/D pair scraped every 5 s: it decodes 4 requests (its counters advance every
    scrape) while `waiting_for_kv` requests wait for their KV; a transfer completes every `transfer_every` s
    (None: never, the prefill side stopped serving pulls)."""
    return [
        EngineSample(
            t=float(t),
            running=4,
            waiting=waiting_for_kv,
            deferred=waiting_for_kv,
            generation_tokens=40.0 * t,
            iterations=10.0 * t,
            kv_usage=0.2,
            external_prompt_tokens=4096.0 * (t // transfer_every) if transfer_every else 0.0,
        )
        for t in range(0, seconds + 1, 5)
    ]


@pytest.mark.parametrize(
    ("name", "trace", "stalls"),
    [
        (
            "transfers stopped while other requests decode",
            decode_engine(300, waiting_for_kv=3, transfer_every=None),
            True,
        ),
        ("transfers complete every 20 s", decode_engine(300, waiting_for_kv=3, transfer_every=20), False),
        ("nothing waits for KV", decode_engine(300, waiting_for_kv=0, transfer_every=None), False),
    ],
)
def test_a_decode_engine_is_judged_on_its_kv_transfers_too(name: str, trace: Trace, stalls: bool) -> None:
    caught = first_stall(trace)
    assert (caught is not None) == stalls, name
    if caught is not None:
        assert CFG.window_seconds <= caught <= CFG.window_seconds + 5  # one scrape after the window
        finding = detect_stall(trace, now=trace[-1].t, cfg=CFG)
        assert finding.message.startswith("3 request(s) waiting for their KV from a prefill engine")
        assert finding.evidence["waitingForKV"] == 3


def test_a_transfer_that_completes_ends_the_wait() -> None:
    stuck = decode_engine(100, waiting_for_kv=2, transfer_every=None)
    arrived = [*stuck[:-1], EngineSample(t=stuck[-1].t, running=6, generation_tokens=1e6, iterations=1e5,
                                         external_prompt_tokens=8192.0, deferred=0.0)]  # fmt: skip
    assert detect_stall(arrived, now=arrived[-1].t, cfg=CFG).reason == "Progressing"
