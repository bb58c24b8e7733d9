"""Short prompts sent while a long prompt prefills in chunks: how long they wait, relative to the long one.

Why relative: the real engine (CPU, tiny model) and aissim (the seed's Ascend timings) run a step in very
different times, but vLLM 0.25.1's scheduler decides in steps: without `--long-prefill-token-threshold` the
running long prompt takes each step's whole budget (vllm/v1/core/sched/scheduler.py:478-480) and a short
prompt starts only once it is done; with a threshold T it takes T tokens (:478-479) and the short prompts the
rest (:827-829). So the short prompts' latency over the long prompt's remaining prefill, measured from the
same instant, is ~1 without the threshold and ~(1..2 steps) / (long prompt / T steps) with it, on any engine
whose scheduler is vLLM's.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tests.fidelity import scenario as sc

#: A long prompt of 32 chunks at the tier's 256-token budget (64 at a threshold of 128), beside three short
#: ones that fit one step's leftover together (4 sequences: the tier's maxNumSeqs).
LONG_PROMPT = 32 * 256 - 64
SHORT_PROMPT = 32
SHORTS = 3
THRESHOLD = 128


@dataclass(frozen=True)
class Share:
    """One measurement on one engine (wall seconds from the moment the short prompts were sent)."""

    shorts: tuple[float, ...]
    """Each short prompt's latency (max_tokens 1: its TTFT as the client sees it)."""
    long_rest: float
    """The long prompt's remaining latency."""

    @property
    def fraction(self) -> float:
        """Median short latency over the long prompt's rest: ~1 when the short prompts wait for it."""
        return statistics.median(self.shorts) / self.long_rest


def measure(target: sc.Target, *, seed: int) -> Share:
    """Send the long prompt, wait until it runs, then the short ones at once; time them all."""
    base = target.base
    sc.settle(base)
    with ThreadPoolExecutor(max_workers=SHORTS + 1) as pool:
        long = pool.submit(sc.ok, base, "/v1/completions", sc.completion(seed, LONG_PROMPT, 1), key=target.key)
        running = lambda: sc.total(sc.snapshot(base), sc.RUNNING) == 1 or long.done()  # noqa: E731
        sc.wait_until("the long prompt running", running, timeout=60)
        assert not long.done(), f"{target.name}: the long prompt finished before the short ones were sent"
        t0 = time.monotonic()

        def short(i: int) -> float:
            sc.ok(base, "/v1/completions", sc.completion(seed + 1 + i, SHORT_PROMPT, 1), key=target.key)
            return time.monotonic() - t0

        shorts = [pool.submit(short, i) for i in range(SHORTS)]
        long.result(timeout=120)
        long_rest = time.monotonic() - t0
        return Share(shorts=tuple(f.result(timeout=120) for f in shorts), long_rest=long_rest)
