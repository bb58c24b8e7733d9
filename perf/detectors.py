"""Trace-replay benchmark of health policies: ours against the peers' on the same labelled traces.

Run on demand: `.venv/bin/python -m perf.detectors`. For every scenario (healthy load, C64 with the canary
queued behind 32 slots at real timings, lone long prefills that complete on vLLM's real semantics (only the
KV gauge moves), the seed's 512K stall at 97.5% KV, hangs under load and while idle, the ~18% drift, load
steps, a stale KV gauge after aborts, acceptance dropping 45% -> 16.6%) it reports, per policy, whether a
fault was detected, the delay from the fault, and false rolls (a roll on a healthy trace or before the
fault); for ours also the readiness lost (seconds the gate was False after first Ready, and flaps). "Ours" is
the operator's own per-pod machine, canary included (harness/replay.py). Targets (issues 5 and 12): stall
caught within 45 s, drift within 10 minutes, zero false rolls, zero flaps and zero lost readiness on healthy
traces.

Peers, modelled from what they observe:
- kubelet /health liveness (10 s period, 3 failures) and MindCluster (/health every 5 s, 3 failures):
  /health stays 200 through every fault here (the seed's stall kept the HTTP server up);
- Dynamo-style canary (every 10 s, 3 s timeout, 3 failures): a canary's latency is modelled from the trace:
  queued behind a full batch it waits like the seed's C64 requests (TTFT 28.56 s), otherwise it needs
  about two engine steps plus the idle TTFT (0.45 s); no step, no answer;
- iteration heartbeat: the engine's step counter must advance every 30 s, busy or not.
"""

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from ascend_operator.api.health import HealthSpec
from harness.replay import canary_latency, replay
from harness.traces import KV_POOL_DSA_CP, Trace, bursty, hang, long_prefill, stale_kv_after_abort, steady

Policy = Callable[[Trace], float | None]
"""Replays a trace; returns the time of the first roll, or None."""

CFG = HealthSpec(startup_grace_seconds=0)
#: Idle-hang scenarios: the engine stops answering at this time (nothing in an idle trace shows it).
DEAD_AFTER: dict[int, float] = {}


def ours(trace: Trace) -> float | None:
    return replay(trace, cfg=CFG, dead_after=DEAD_AFTER.get(id(trace))).first_roll


def health_endpoint(period: float, failures: int) -> Policy:
    """/health answers 200 while the process lives: none of these traces kills the process."""

    def replay(trace: Trace) -> float | None:
        return None

    return replay


def dynamo_canary(trace: Trace, *, period: float = 10.0, timeout: float = 3.0, failures: int = 3) -> float | None:
    failed, next_at = 0, period
    for before, after in itertools.pairwise(trace):
        if after.t < next_at:
            continue
        next_at = after.t + period
        dead = DEAD_AFTER.get(id(trace))
        latency = float("inf") if dead is not None and after.t >= dead else canary_latency(before, after)
        failed = failed + 1 if latency > timeout else 0
        if failed >= failures:
            return after.t
    return None


def iteration_heartbeat(trace: Trace, *, window: float = 30.0) -> float | None:
    last_change = trace[0].t
    for before, after in itertools.pairwise(trace):
        if after.iterations != before.iterations:
            last_change = after.t
        elif after.t - last_change >= window:
            return after.t
    return None


POLICIES: dict[str, Policy] = {
    "ours": ours,
    "kubelet /health": health_endpoint(10, 3),
    "MindCluster /health": health_endpoint(5, 3),
    "Dynamo canary": dynamo_canary,
    "iteration heartbeat": iteration_heartbeat,
}


@dataclass(frozen=True, kw_only=True)
class Scenario:
    name: str
    trace: Trace
    fault_at: float | None
    """When the fault starts; None for a healthy trace."""
    target: float | None = None


def _stall_start(trace: Trace) -> float:
    return next(s.t for s, nxt in itertools.pairwise(trace) if s.kv_usage >= 0.975 and nxt.kv_usage >= 0.975)


def _ramp(start: float) -> Callable[[float], float]:
    return lambda t: 1.0 if t < start else 1.0 + 0.18 * min(1.0, (t - start) / 600)


def _steps(t: float) -> int:
    return 1 if t < 1200 else (64 if t < 2400 else 8)


def _acceptance_drop(t: float) -> float:
    return 0.45 if t < 3600 else 0.166  # synthetic -> real traffic (docs/FACTS.md "Speculative decoding")


def scenarios() -> list[Scenario]:
    stall = long_prefill(524_288, pool=KV_POOL_DSA_CP, stall_at_kv=0.975, tail=600)
    idle_hang = steady(1200, batch=0)
    DEAD_AFTER[id(idle_hang)] = 600
    return [
        Scenario(name="C64, canary queued (290 s)", trace=steady(290, batch=64), fault_at=None),
        Scenario(name="lone 256K prefill", trace=long_prefill(262_144), fault_at=None),
        Scenario(name="hang while idle", trace=idle_hang, fault_at=600, target=45),
        Scenario(name="healthy bursty C1..C64 (3 h)", trace=bursty(3 * 3600), fault_at=None),
        Scenario(name="300K prefill completes", trace=long_prefill(300_000), fault_at=None),
        Scenario(name="512K prefill completes", trace=long_prefill(524_288), fault_at=None),
        Scenario(name="512K stall at 97.5% KV", trace=stall, fault_at=_stall_start(stall), target=45),
        Scenario(name="hang under C8", trace=hang(1200, at=600), fault_at=600, target=45),
        Scenario(name="18% drift at C32", trace=steady(3600, batch=32, slowdown=_ramp(1200)), fault_at=1200,
                 target=600),
        Scenario(name="load steps C1 -> C64 -> C8", trace=steady(3600, batch=_steps), fault_at=None),
        Scenario(name="stale 99% KV after aborts", trace=stale_kv_after_abort(1800), fault_at=None),
        Scenario(name="acceptance 45% -> 16.6%", trace=steady(7200, batch=32, acceptance=_acceptance_drop),
                 fault_at=None),
    ]  # fmt: skip


def evaluate(scenario: Scenario, policy: Policy) -> tuple[str, str, int]:
    """(detected, delay, false rolls) for one cell."""
    rolled = policy(scenario.trace)
    if scenario.fault_at is None:
        return ("-", "-", 0 if rolled is None else 1)
    if rolled is None:
        return ("no", "-", 0)
    if rolled < scenario.fault_at:
        return ("no", "-", 1)
    return ("yes", f"{rolled - scenario.fault_at:.0f}s", 0)


def main() -> int:
    cases = scenarios()
    header = f"{'scenario':34s}" + "".join(f"| {name:22s}" for name in POLICIES) + "| ours: lost ready, flaps"
    print(header)
    print("-" * len(header))
    missed = []
    totals = dict.fromkeys(POLICIES, 0)
    for case in cases:
        cells = []
        for name, policy in POLICIES.items():
            detected, delay, false = evaluate(case, policy)
            totals[name] += false
            cells.append(f"| {detected:3s} {delay:>7s} {'FALSE' if false else '':6s}   ")
            if name == "ours" and case.target is not None and (detected != "yes" or float(delay[:-1]) > case.target):
                missed.append(f"{case.name}: target {case.target:.0f}s, got {detected} {delay}")
            if name == "ours" and false:
                missed.append(f"{case.name}: false roll")
        run = replay(case.trace, cfg=CFG, dead_after=DEAD_AFTER.get(id(case.trace)))
        lost = f"{run.lost_ready_seconds:.0f}s, {run.flaps}"
        if case.fault_at is None and (run.flaps or run.lost_ready_seconds):
            missed.append(f"{case.name}: readiness lost {lost}")
        print(f"{case.name:34s}" + "".join(cells) + f"| {lost}")
    print("-" * len(header))
    print(f"{'false rolls':34s}" + "".join(f"| {totals[n]:<22d}" for n in POLICIES))
    print("\ntargets: stall <= 45 s, drift <= 600 s, zero false rolls, no readiness lost on healthy traces")
    print("missed: " + ("; ".join(missed) if missed else "none"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
