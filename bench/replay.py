"""Replay an engine trace through the operator's own per-pod health machine, canary included.

Why here and not in each test: the trace benchmark (bench/detectors.py) and the machine's tests must run
exactly what the operator runs (`ascend_operator.health.machine.step`, fed the way controller/monitor.py
feeds it: a scrape every `scrapeIntervalSeconds`, canaries on their own period, each judged against the
samples right before it was sent and right after it ended). Only the engine is modelled: a canary's latency
comes from the trace (queued behind full slots it waits like the seed's C64 requests, TTFT 28.56 s; behind a
lone chunked prefill it waits for the prefill; otherwise about two engine steps plus the idle TTFT 0.45 s),
and an answered canary adds its own tokens to the engine's counters, as it would on a real engine.
"""

import bisect
from dataclasses import dataclass, field, replace

from ascend_operator.api.health import HealthSpec
from ascend_operator.health.judge import CanaryOutcome
from ascend_operator.health.machine import Observations, RequestRoll, SetGate, canary_due, resume, step
from ascend_operator.health.samples import EngineSample

#: docs/FACTS.md: TTFT at C64 (requests 33..64 wait for one of 32 slots) and an idle engine's TTFT.
SEED_C64_TTFT = 28.56
IDLE_TTFT = 0.45


@dataclass(frozen=True, kw_only=True)
class Replayed:
    """What the operator did over a trace."""

    first_roll: float | None
    gate: list[tuple[float, bool]] = field(default_factory=list)
    """Gate writes (time, ready)."""
    lost_ready_seconds: float = 0.0
    """Seconds the gate was False after it first went True."""

    @property
    def flaps(self) -> int:
        """Times the gate went from True to False."""
        return sum(1 for (_, a), (_, b) in zip(self.gate, self.gate[1:], strict=False) if a and not b)


def canary_latency(before: EngineSample, after: EngineSample) -> float:
    """Seconds until a canary sent at `before.t` gets its first token, judged from the next sample."""
    if after.waiting > 0:
        return SEED_C64_TTFT
    if after.running <= 0:
        return IDLE_TTFT
    steps = after.iterations - before.iterations
    if steps <= 0:  # no step with outputs: a long prefill holds the batch, or the engine is stuck
        return float("inf")
    return IDLE_TTFT + 2 * (after.t - before.t) / steps


class _Engine:
    """The trace, plus the tokens the operator's own canaries generated."""

    def __init__(self, trace: list[EngineSample], dead_after: float | None) -> None:
        self.trace = trace
        self.times = [s.t for s in trace]
        self.dead_after = dead_after
        self.extra: list[tuple[float, float]] = []  # (time, tokens) of answered canaries

    def at(self, t: float) -> EngineSample:
        i = max(0, bisect.bisect_right(self.times, t) - 1)
        base = self.trace[i]
        extra = sum(n for when, n in self.extra if when <= t)
        if not extra:
            return replace(base, t=t)
        return replace(base, t=t, generation_tokens=base.generation_tokens + extra, iterations=base.iterations + extra)

    def canary(self, start: float, *, timeout: float, tokens: int) -> tuple[bool, float]:
        """(tokens came back, when the canary ended)."""
        i = min(len(self.trace) - 1, bisect.bisect_right(self.times, start))
        before, after = self.at(start), self.trace[i]
        dead = self.dead_after is not None and start >= self.dead_after
        latency = float("inf") if dead else canary_latency(before, after)
        if latency > timeout:
            return False, start + timeout
        self.extra.append((start + latency, float(tokens)))
        return True, start + latency


def replay(
    trace: list[EngineSample],
    *,
    cfg: HealthSpec,
    dead_after: float | None = None,
    checked: bool = True,
    resumed_gate: tuple[bool, str] | None = None,
) -> Replayed:
    """Run the machine over the trace. `dead_after`: the engine answers nothing from then on (a hang that
    the trace alone cannot show on an idle engine); `checked`: the config check already passed;
    `resumed_gate`: the gate the pod carried when this (restarted) operator first saw it."""
    engine = _Engine(trace, dead_after)
    state = replace(resume(resumed_gate), mismatches=() if checked else None)
    first_roll: float | None = None
    gates: list[tuple[float, bool]] = []
    canary: tuple[float, bool, float] | None = None  # (sent, ok, ends)
    t, end = trace[0].t, trace[-1].t
    while t <= end:
        outcome = None
        if canary is not None and canary[2] <= t:
            sent, ok, ends = canary
            outcome = CanaryOutcome(ok=ok, before=engine.at(sent), after=engine.at(ends), ended=ends)
            canary = None
        state, _, actions = step(state, Observations(sample=engine.at(t), canary=outcome), now=t, cfg=cfg)
        for action in actions:
            if isinstance(action, SetGate):
                gates.append((t, action.ready))
            elif isinstance(action, RequestRoll) and first_roll is None:
                first_roll = t
        if first_roll is not None:
            break
        if canary_due(state, now=t, cfg=cfg, in_flight=canary is not None):
            ok, ends = engine.canary(t, timeout=cfg.canary.timeout_seconds, tokens=cfg.canary.max_tokens)
            canary = (t, ok, ends)
        t += cfg.scrape_interval_seconds
    return Replayed(first_roll=first_roll, gate=gates, lost_ready_seconds=_lost(gates, min(t, end)))


def _lost(gates: list[tuple[float, bool]], end: float) -> float:
    lost, down_since, seen_ready = 0.0, None, False
    for when, ready in gates:
        if ready:
            seen_ready = True
            if down_since is not None:
                lost, down_since = lost + when - down_since, None
        elif seen_ready and down_since is None:
            down_since = when
    return lost + (end - down_since if down_since is not None else 0.0)
