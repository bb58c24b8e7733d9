"""Short prompts sent while a long prompt prefills in chunks: how long they wait, relative to the long one.

Why relative: the real engine (CPU, tiny model) and aissim (the seed's Ascend timings) run a step in very
different times, but vLLM 0.25.1's scheduler decides in steps: without `--long-prefill-token-threshold` the
running long prompt takes each step's whole budget (vllm/v1/core/sched/scheduler.py:478-480) and a short
prompt starts only once it is done; with a threshold T it takes T tokens (:478-479) and the short prompts the
rest (:827-829). So the seconds a short prompt spends WAITING, over the long prompt's PREFILL seconds, are
most of it without the threshold (all that is left once it arrives) and ~0 with it (read between two steps,
scheduled in the next), on any engine whose scheduler is vLLM's. Both times are the engine core's own
(vllm:request_queue_time_seconds, vllm:request_prefill_time_seconds): the client's latency adds the API
server's, which on a loaded 2-core machine swings by tenths of a second (0.05 vs 0.34 s for the same
short prompts on the real engine in two runs), and is printed, not asserted.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tests.fidelity import scenario as sc

#: A long prompt of 128 chunks at the tier's 256-token budget (256 at a threshold of 128), beside three short
#: ones that fit one step's leftover together (4 sequences: the tier's maxNumSeqs). 32 chunks were prefilled
#: by the real engine on an idle machine before the short prompts went out.
LONG_PROMPT = 128 * 256 - 64
SHORT_PROMPT = 32
SHORTS = 3
THRESHOLD = 128


#: When the short prompts go out, as a share of the long prompt's prefill time alone on the same engine (timed
#: first): the long one reaches the engine core first (the short ones must queue behind it, not before it) and
#: the short ones wait for the same share of it on either engine (a fixed 0.1 s was 17% of the real engine's
#: 0.6 s prefill and 6% of aissim's 1.6 s). A /metrics poll for "running" lagged most of a prefill behind on a
#: loaded machine.
SHORTS_AT = 0.15
ATTEMPTS = 3


QUEUE = "vllm:request_queue_time_seconds_sum"
PREFILL = "vllm:request_prefill_time_seconds_sum"


@dataclass(frozen=True)
class Share:
    """One measurement on one engine: wall seconds from the moment the short prompts were sent, and the
    engine's own per-phase seconds (the engine core's timestamps: no HTTP, no API server in them)."""

    shorts: tuple[float, ...]
    """Each short prompt's latency (max_tokens 1: its TTFT as the client sees it)."""
    long_rest: float
    """The long prompt's remaining latency."""
    long_total: float
    """The long prompt's whole latency, from its own send."""
    queued: float
    """Seconds all four requests spent WAITING (vllm:request_queue_time_seconds): the short prompts' (the
    long prompt starts on an idle engine at once)."""
    prefilling: float
    """Seconds all four spent in PREFILL (vllm:request_prefill_time_seconds): the long prompt's chunks, plus
    one step per short prompt."""

    @property
    def fraction(self) -> float:
        """A short prompt's mean WAITING time over the long prompt's prefill, as the engine timed them: most
        of it when the short prompts wait for the long one, about one step's share when they do not. The
        engine's own clock: on a loaded 2-core machine the API server's latency swings by tenths of a second."""
        return self.queued / SHORTS / self.prefilling

    @property
    def sent_early(self) -> bool:
        """The short prompts went out in the first half of the long prompt's prefill (else the measure says
        little: a long prompt almost done leaves nothing to wait for)."""
        return self.long_rest > self.long_total / 2


def _once(target: sc.Target, *, seed: int) -> Share:
    base = target.base
    sc.settle(base)
    t_solo = time.monotonic()
    sc.ok(base, "/v1/completions", sc.completion(seed + 50, LONG_PROMPT, 1), key=target.key)
    solo = time.monotonic() - t_solo
    before = sc.settle(base)
    with ThreadPoolExecutor(max_workers=SHORTS + 1) as pool:
        t_long = time.monotonic()
        long = pool.submit(sc.ok, base, "/v1/completions", sc.completion(seed, LONG_PROMPT, 1), key=target.key)
        time.sleep(SHORTS_AT * solo)
        assert not long.done(), f"{target.name}: the long prompt finished before the short ones were sent"
        t0 = time.monotonic()

        def short(i: int) -> float:
            sc.ok(base, "/v1/completions", sc.completion(seed + 1 + i, SHORT_PROMPT, 1), key=target.key)
            return time.monotonic() - t0

        shorts = [pool.submit(short, i) for i in range(SHORTS)]
        long.result(timeout=120)
        done = time.monotonic()
        walls = tuple(f.result(timeout=120) for f in shorts)
    after = sc.settle(base)
    return Share(
        walls,
        long_rest=done - t0,
        long_total=done - t_long,
        queued=sc.total(after, QUEUE) - sc.total(before, QUEUE),
        prefilling=sc.total(after, PREFILL) - sc.total(before, PREFILL),
    )


def measure(target: sc.Target, *, seed: int) -> Share:
    """Send the long prompt, then the short ones at once; time them all. Again (fresh prompts) when the short
    ones went out too late in the long prefill to mean anything, up to ATTEMPTS times."""
    for attempt in range(ATTEMPTS):
        share = _once(target, seed=seed + 100 * attempt)
        if share.sent_early:
            return share
    raise AssertionError(f"{target.name}: short prompts sent late into the long prefill {ATTEMPTS} times: {share}")
