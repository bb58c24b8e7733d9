"""Synthetic engine traces for detector tests and the trace-replay benchmark.

Each trace is a list of `EngineSample`s at a fixed scrape interval, shaped by the seed's figures
(docs/FACTS.md): decode step time per batch size from the TP8 sweep (TPOT C1 14.2 ms ... C32 50.5 ms), the
512K prefill (148.76 s, KV 0.6% -> 97.5%), the ~18% drift, DSpark acceptance 45% vs 16.6%.
"""

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

from ascend_operator.health.samples import EngineSample

#: docs/FACTS.md TP8 concurrency sweep: mean TPOT by concurrency (seconds per step at that batch).
STEP_SECONDS = {1: 0.0142, 8: 0.0275, 16: 0.0355, 32: 0.0505, 64: 0.0540}
KV_POOL = 1_078_120
KV_POOL_DSA_CP = 969_000  # docs/FACTS.md: DSA-CP on TP8 leaves ~969K tokens of KV
#: KV slots per context token in the hybrid KV layout. The seed's 512K prefill stalled at 97.5% of the
#: DSA-CP pool before completing, so it needs more than 0.975 x 969000 / 524288 = 1.80 slots per token.
KV_PER_TOKEN = 1.85
PREFILL_512K_SECONDS = 148.76
MBT = 8192


def step_seconds(batch: int) -> float:
    """Decode step time at a batch size, interpolated in the seed's sweep (C64 runs 32 + 32 waiting)."""
    batch = max(1, min(batch, 32))
    points = sorted(STEP_SECONDS.items())
    for (b0, s0), (b1, s1) in itertools.pairwise(points):
        if b0 <= batch <= b1:
            return s0 + (s1 - s0) * (batch - b0) / (b1 - b0)
    return STEP_SECONDS[32]


@dataclass
class Engine:
    """Integrates counters over time for a load shape."""

    t: float = 0.0
    prompt: float = 0.0
    gen: float = 0.0
    iters: float = 0.0
    kv: float = 0.0
    drafts: float = 0.0
    accepted: float = 0.0

    def advance(
        self, dt: float, *, batch: int, slowdown: float = 1.0, acceptance: float = 0.45, prompt_per_step: float = 2.0
    ) -> None:
        if batch > 0:
            steps = dt / (step_seconds(batch) * slowdown)
            self.iters += steps
            self.drafts += steps * batch
            accepted = steps * batch * acceptance * 7 * 0.3
            self.accepted += accepted
            self.gen += steps * batch + accepted
            self.prompt += steps * prompt_per_step
        self.t += dt

    def sample(self, *, running: float, waiting: float = 0.0, kv: float | None = None) -> EngineSample:
        return EngineSample(
            t=self.t,
            running=running,
            waiting=waiting,
            kv_usage=self.kv if kv is None else kv,
            prompt_tokens=math.floor(self.prompt),
            generation_tokens=math.floor(self.gen),
            iterations=math.floor(self.iters),
            spec_drafts=math.floor(self.drafts),
            spec_accepted=math.floor(self.accepted),
        )


Trace = list[EngineSample]


def steady(
    seconds: float,
    *,
    batch: int | Callable[[float], int],
    interval: float = 5.0,
    slowdown: Callable[[float], float] = lambda t: 1.0,
    acceptance: Callable[[float], float] = lambda t: 0.45,
) -> Trace:
    eng = Engine()
    out = [eng.sample(running=0)]
    while eng.t < seconds:
        b = batch(eng.t) if callable(batch) else batch
        eng.advance(interval, batch=b, slowdown=slowdown(eng.t), acceptance=acceptance(eng.t))
        eng.kv = min(0.6, b * 3000 / KV_POOL)
        out.append(eng.sample(running=min(b, 32), waiting=max(0, b - 32)))
    return out


def long_prefill(
    context: int, *, pool: int = KV_POOL, stall_at_kv: float | None = None, interval: float = 5.0, tail: float = 120.0
) -> Trace:
    """One request of `context` tokens: chunked prefill, then decode, on vLLM 0.25.1's semantics: while the
    prefill runs no counter moves (iteration stats only for steps with outputs, prompt tokens at prefill
    completion) and only the KV gauge climbs chunk by chunk; at completion prompt tokens jump by `context`
    and the first token and step are counted.

    With `stall_at_kv`, forward progress stops once KV passes it (the seed's 512K run at 97.5%).
    """
    eng = Engine()
    out = [eng.sample(running=0)]
    duration = PREFILL_512K_SECONDS * (context / 524_288) ** 1.2
    filled = 0.0
    while eng.t < duration + tail:
        eng.t += interval
        if filled < context:
            target = min(context, filled + context * interval / duration)
            kv_now = (target + 1) * KV_PER_TOKEN / pool
            if stall_at_kv is not None and kv_now >= stall_at_kv:
                out.append(eng.sample(running=1, kv=min(kv_now, stall_at_kv)))
                eng.kv = min(kv_now, stall_at_kv)
                continue
            filled = target
            eng.kv = kv_now
            if filled >= context:
                eng.prompt += context
                eng.gen += 1
                eng.iters += 1
        else:
            eng.iters += interval / step_seconds(1)
            eng.gen += interval / step_seconds(1)
        out.append(eng.sample(running=1))
    return out


def hang(seconds: float, *, at: float, batch: int = 8, interval: float = 5.0) -> Trace:
    """Healthy decode, then every counter freezes at `at` while requests stay running."""
    eng = Engine()
    out = [eng.sample(running=0)]
    while eng.t < seconds:
        if eng.t < at:
            eng.advance(interval, batch=batch)
        else:
            eng.t += interval
        out.append(eng.sample(running=batch, kv=0.05))
    return out


def stale_kv_after_abort(seconds: float, *, interval: float = 5.0) -> Trace:
    """Aborted requests left the KV gauge at 99% with nothing running (vllm issue 29928)."""
    return [EngineSample(t=i * interval, running=0, kv_usage=0.99) for i in range(int(seconds / interval) + 1)]


def bursty(seconds: float, *, seed: int = 7, interval: float = 5.0, idle_share: float = 0.15) -> Trace:
    """Healthy bursty traffic: concurrency jumps between C1 and C64 every minute, with idle gaps."""
    import random

    rng = random.Random(seed)
    levels = [0 if rng.random() < idle_share else rng.choice([1, 8, 16, 32, 64]) for _ in range(int(seconds // 60) + 1)]
    return steady(seconds, batch=lambda t: levels[int(t // 60)], interval=interval)
