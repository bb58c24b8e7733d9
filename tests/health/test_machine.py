"""Each pod's health machine over traces at the seed's real timings, canary included (fake clock, no cluster).

The traces are on vLLM 0.25.1's semantics (harness/traces.py): during a lone chunked prefill only the KV gauge
moves. The replay feeds the machine the way controller/monitor.py does (harness/replay.py).
"""

import itertools
from dataclasses import replace

import pytest

from ascend_operator.api.health import HealthSpec
from ascend_operator.api.reasons import EventReason, VerdictReason
from ascend_operator.health.judge import CanaryOutcome, PodHealth
from ascend_operator.health.machine import Announce, Observations, SetGate, resume, step
from ascend_operator.health.samples import EngineSample
from harness.replay import replay
from harness.traces import KV_POOL_DSA_CP, hang, long_prefill, steady

CFG = HealthSpec(startup_grace_seconds=0)  # defaults otherwise: canary every 10 s, 10 s timeout, 30 s window


@pytest.mark.parametrize(
    ("name", "trace"),
    [
        ("C64 at real timings: the canary waits 28.56 s for a slot", steady(290, batch=64)),
        ("lone 256K prefill, only KV moves for ~55 s", long_prefill(262_144)),
        ("lone 512K prefill, only KV moves for ~149 s", long_prefill(524_288)),
        ("idle engine, only canaries ask", steady(600, batch=0)),
        ("steady C32", steady(600, batch=32)),
    ],
)
def test_healthy_engines_never_lose_readiness_and_are_never_rolled(name: str, trace: list[EngineSample]) -> None:
    run = replay(trace, cfg=CFG)
    assert run.first_roll is None, name
    assert run.gate, name
    assert run.gate[-1][1], f"{name}: gate writes {run.gate}"
    assert (run.flaps, run.lost_ready_seconds) == (0, 0.0), f"{name}: gate writes {run.gate}"


def test_idle_hang_is_rolled_within_45s() -> None:
    # Nothing but the canary asks anything of this engine; it stops answering at t=300 with /health 200.
    run = replay(steady(900, batch=0), cfg=CFG, dead_after=300)
    assert run.first_roll is not None
    assert 300 < run.first_roll <= 345


def test_busy_hang_is_rolled_within_45s() -> None:
    run = replay(hang(900, at=300), cfg=CFG)
    assert run.first_roll is not None
    assert 300 + CFG.stall.window_seconds <= run.first_roll <= 345


def test_the_seeds_512k_stall_is_rolled_within_45s_of_freezing() -> None:
    trace = long_prefill(524_288, pool=KV_POOL_DSA_CP, stall_at_kv=0.975, tail=300)
    frozen = next(a.t for a, b in itertools.pairwise(trace) if a.kv_usage >= 0.975 and b.kv_usage >= 0.975)
    run = replay(trace, cfg=CFG)
    assert run.first_roll is not None
    assert run.first_roll - frozen <= 45


def test_a_restarted_operator_keeps_a_serving_pods_gate_while_it_rechecks() -> None:
    # The new operator process knows nothing but the gate the pod carries: no False write while it re-runs
    # the config check and the first canary, so a restart or peering handover is not an outage.
    run = replay(steady(120, batch=32), cfg=CFG, checked=False, resumed_gate=(True, "CanaryPassing"))
    assert run.first_roll is None
    assert all(ready for _, ready in run.gate), run.gate


def test_a_restarted_operator_still_takes_a_hung_pod_out() -> None:
    run = replay(hang(300, at=0), cfg=CFG, checked=False, resumed_gate=(True, "CanaryPassing"))
    assert run.first_roll is not None
    assert run.first_roll <= 45
    assert (run.first_roll, False) in run.gate


def test_a_gate_is_written_once_per_change() -> None:
    state = replace(resume(None), mismatches=())
    sample = EngineSample(t=0.0, running=1, generation_tokens=10.0, iterations=10.0)
    ok = CanaryOutcome(ok=True, before=sample, after=replace(sample, t=1.0, generation_tokens=14.0), ended=1.0)
    writes = []
    for i, canary in enumerate([ok, None, None]):
        later = replace(sample, t=5.0 * (i + 1), generation_tokens=20.0 * (i + 1), iterations=20.0 * (i + 1))
        state, _, actions = step(state, Observations(sample=later, canary=canary), now=later.t, cfg=CFG)
        writes += [a for a in actions if isinstance(a, SetGate)]
    assert writes == [
        SetGate(ready=True, reason=VerdictReason.CANARY_PASSING, message="tokens come back and the engine advances")
    ]


def _serving(restarts: int) -> tuple[PodHealth, EngineSample]:
    """A pod Ready on a passing canary at t=5, its engine container restarted `restarts` times so far."""
    state = replace(resume(None), mismatches=())
    sample = EngineSample(t=0.0, running=1, generation_tokens=10.0, iterations=10.0)
    ok = CanaryOutcome(ok=True, before=sample, after=replace(sample, t=1.0, generation_tokens=14.0), ended=1.0)
    later = replace(sample, t=5.0, generation_tokens=20.0, iterations=20.0)
    state, verdict, _ = step(state, Observations(sample=later, canary=ok, restarts=restarts), now=5.0, cfg=CFG)
    assert verdict.ready
    return state, later


def test_a_crash_shorter_than_the_canarys_vouching_window_takes_the_pod_out_until_it_passes_again() -> None:
    # The engine exited and the kubelet restarted it between two scrapes: the next scrape answers (the new
    # process's counters from 0), and the canary that passed 5 s ago would vouch for it for ~70 s.
    state, _sample = _serving(restarts=0)
    fresh = EngineSample(t=10.0, running=0, generation_tokens=0.0, iterations=0.0)
    crashed = Observations(sample=fresh, restarts=1, last_exit="Error, exit code 1")
    state, verdict, actions = step(state, crashed, now=10.0, cfg=CFG)
    announced = [a for a in actions if isinstance(a, Announce)]
    assert [a.reason for a in announced] == [EventReason.ENGINE_RESTARTED]
    assert "1 restart(s) (its previous run: Error, exit code 1)" in announced[0].message
    assert SetGate(ready=False, reason=verdict.reason, message=verdict.message) in actions
    assert not verdict.ready
    assert verdict.roll is None
    assert state.samples == (fresh,)
    assert state.last_canary is None
    assert state.mismatches is None
    # Ready again once the new process's config check and a canary pass; the event is not posted twice
    ok = CanaryOutcome(ok=True, before=fresh, after=replace(fresh, t=11.0, generation_tokens=4.0), ended=11.0)
    later = replace(fresh, t=15.0, generation_tokens=10.0, iterations=10.0)
    state, verdict, actions = step(state, Observations(sample=later, canary=ok, config=(), restarts=1), now=15, cfg=CFG)
    assert verdict.ready
    assert not [a for a in actions if isinstance(a, Announce)]


def test_a_restart_count_seen_first_is_history_not_a_crash() -> None:
    # An operator that starts (or a pod first seen) reads the count the pod already has: no event, no reset.
    state, sample = _serving(restarts=3)
    later = replace(sample, t=10.0, generation_tokens=30.0, iterations=30.0)
    state, verdict, actions = step(state, Observations(sample=later, restarts=3), now=10.0, cfg=CFG)
    assert verdict.ready
    assert not [a for a in actions if isinstance(a, Announce)]
    assert len(state.samples) == 2
