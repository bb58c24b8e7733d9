"""Run one measured point against an endpoint: calibrate prompt text, scrape, load, scrape again.

Why this module exists: every scenario (sweep, prefill, mixed, A/B) measures the same way, so the way is
written once: a snapshot of /metrics (and of aissim's engine clock) before, a closed loop of C workers
over a fixed list of planned requests, a sampler that keeps the KV-usage and running peaks, a snapshot
after. The scrapes bracket only the planned requests (calibration probes come before), so the engine's
finished-request delta must equal the planned requests the client saw complete exactly (vLLM does not count
the ones the client gave up on).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from ascend_operator.bench import prompts
from ascend_operator.bench import snapshots as m
from ascend_operator.bench.client import Endpoint
from ascend_operator.bench.rules import Batch, Clock, RequestRecord


class Progress(Protocol):
    def update(self, n: int = 1) -> object: ...

    def close(self) -> None: ...


ProgressFactory = Callable[[str, int], Progress]


def tqdm_progress(desc: str, total: int) -> Progress:
    """A progress bar per point on stderr (stdout stays the Markdown table)."""
    from tqdm import tqdm

    bar: Progress = tqdm(total=total, desc=desc, unit="req", file=sys.stderr, dynamic_ncols=True, leave=True)
    return bar


@dataclass(frozen=True)
class Plan:
    """One request to send: its prompt key, requested prompt length and fixed output length."""

    key: str
    prompt_tokens: int
    max_tokens: int
    kind: str = "short"


@dataclass
class Target:
    """An endpoint with what the bench learned about it: clock, model, calibrated text ratio."""

    endpoint: Endpoint
    info: dict[str, Any]
    model: str
    clock: Clock
    chars_per_token: float = prompts.DEFAULT_CHARS_PER_TOKEN
    calibration: list[dict[str, int]] | None = None


async def open_target(endpoint: Endpoint, model: str | None) -> Target:
    info = await endpoint.describe()
    served = info["models"]
    if model is None:
        if not served:
            raise RuntimeError(f"{endpoint.base}/v1/models lists no model")
        model = str(served[0])
    clock = Clock(info["clock"], float(info["time_scale"]))
    return Target(endpoint=endpoint, info=info, model=model, clock=clock)


async def calibrate(target: Target, *, seed: int, tokens: int) -> None:
    """Two probe requests refine the characters-per-token ratio from the engine's usage counts."""
    target.calibration = []
    probe = min(tokens, 8192)
    for attempt in range(2):
        text = prompts.make_text(
            prompts.prompt_key(seed, "calibrate", target.endpoint.label, attempt),
            prompts.chars_for(probe, target.chars_per_token),
        )
        rec = await target.endpoint.complete(
            model=target.model, text=text, max_tokens=1, index=-1 - attempt, kind="probe", requested=probe
        )
        if not rec.ok:
            raise RuntimeError(f"calibration request to {target.endpoint.base} failed: {rec.error}")
        target.chars_per_token = prompts.refine(len(text), rec.prompt_tokens)
        target.calibration.append({"chars": len(text), "prompt_tokens": rec.prompt_tokens})


#: The longest gap between the /metrics samples taken during a point (peak KV and running requests): the gap
#: starts at 0.2 s and doubles up to this. Not 0.2 s throughout: on vLLM 0.25.1 (CPU, tests/real/test_bench_real.py)
#: scraping 5 times a second cost the engine's API server ~18% of the point's throughput (292 vs 358 tok/s,
#: medians of 3, side by side on one engine), and a bench must not measure its own observer effect. A short
#: point is still sampled densely (its peak would otherwise fall between two samples); a long one about once a
#: second.
POLL_SECONDS = 1.0
#: The mixed workload asks what happens to short requests that arrive while the long one prefills, so the
#: short workers start once the long request's stream has opened (the engine holds it), at most this many
#: wall seconds after it went out: a 300K prompt is ~1.2 MB to send and tokenize, and sent together the short
#: ones reached the engine first in most rounds (the long one 1.5-7 engine seconds later), which left the
#: question unasked. Behind a P/D router the stream opens only after the prefill: then the bound applies.
LONG_FIRST_WAIT_S = 1.0
FIRST_POLL_SECONDS = 0.2


async def run_point(
    target: Target,
    plans: Sequence[Plan],
    *,
    concurrency: int,
    label: str,
    context: int | None,
    progress: ProgressFactory | None,
    poll_s: float = POLL_SECONDS,
    routes: Mapping[str, Endpoint] | None = None,
) -> Batch:
    """`routes` sends the plans of a kind to another endpoint (the mixed workload's long request to an engine
    of its own); the target's endpoint must then scrape that engine's /metrics too (its metrics_urls)."""
    ep = target.endpoint
    routes = routes or {}
    engines = list(dict.fromkeys([*ep.metrics_urls, *(u for r in routes.values() for u in r.metrics_urls)]))
    before = await ep.snapshot()
    busy0 = await ep.busy_seconds() if target.clock.kind == "aissim" else None
    texts = [prompts.make_text(p.key, prompts.chars_for(p.prompt_tokens, target.chars_per_token)) for p in plans]
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(plans)):
        queue.put_nowait(i)
    records: list[RequestRecord | None] = [None] * len(plans)
    bar = progress(f"{ep.label} {label}", len(plans)) if progress else None
    peaks = {"kv": 0.0, "running": 0.0}
    kinds = {p.kind for p in plans}
    gate = asyncio.Event() if "long" in kinds and len(kinds) > 1 else None

    async def worker() -> None:
        while True:
            try:
                i = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            plan = plans[i]
            if gate is not None and plan.kind != "long" and not gate.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(gate.wait(), LONG_FIRST_WAIT_S)
            records[i] = await routes.get(plan.kind, ep).complete(
                model=target.model,
                text=texts[i],
                max_tokens=plan.max_tokens,
                index=i,
                kind=plan.kind,
                requested=plan.prompt_tokens,
                trace=plan.kind == "long",
                opened=gate if plan.kind == "long" else None,
            )
            if bar:
                bar.update(1)

    async def sampler() -> None:
        gap = min(FIRST_POLL_SECONDS, poll_s)
        while True:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                snap = await ep.snapshot()
                peaks["kv"] = max(peaks["kv"], max(snap.per_engine(m.KV_USAGE).values(), default=0.0))
                peaks["running"] = max(peaks["running"], snap.total(m.RUNNING))
            await asyncio.sleep(gap)
            gap = min(2 * gap, poll_s)

    e0 = {u: await ep.sim_state(u) for u in engines} if target.clock.kind == "aissim" else {}
    t0 = time.monotonic()
    sampling = asyncio.create_task(sampler())
    try:
        await asyncio.gather(*(worker() for _ in range(min(concurrency, len(plans)))))
    finally:
        sampling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampling
        if bar:
            bar.close()
    wall = time.monotonic() - t0
    after: m.Snapshot | None = None
    error: str | None = None
    busy: dict[str, float] | None = None
    try:
        after = await ep.snapshot()
        busy1 = await ep.busy_seconds() if target.clock.kind == "aissim" else None
        if busy0 is not None and busy1 is not None:
            busy = {e: busy1[e] - busy0.get(e, 0.0) for e in busy1}
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    done = [r for r in records if r is not None]
    if e0:
        done = await _on_engine_clock(ep, done, e0, t0=t0, scale=target.clock.scale)
    return Batch(
        endpoint=ep.label,
        label=label,
        concurrency=concurrency,
        context=context,
        records=done,
        before=before,
        after=after,
        wall_s=wall,
        clock=target.clock,
        scrape_error=error,
        busy_s=busy,
        kv_peak=peaks["kv"],
        running_peak=peaks["running"],
        started_at=t0,
    )


async def _on_engine_clock(
    ep: Endpoint, records: list[RequestRecord], states: Mapping[str, Any], *, t0: float, scale: float
) -> list[RequestRecord]:
    """Against aissim, each request's times as its engine recorded them: a client on a loaded host reads a
    stream late by its own scheduling delay, which the time scale multiplies into engine seconds."""
    ids = [r.response_id for r in records if r.ok and r.response_id]
    found: dict[str, tuple[float, dict[str, Any]]] = {}
    for url, state in states.items():
        if state is None or "engine_time_s" not in state:
            continue
        for rid, times in (await ep.request_times(url, ids)).items():
            found[rid] = (float(state["engine_time_s"]), times)
    return [rebase(r, *found[r.response_id], t0=t0, scale=scale) if r.response_id in found else r for r in records]


def rebase(record: RequestRecord, e0: float, times: Mapping[str, Any], *, t0: float, scale: float) -> RequestRecord:
    """A record with its times replaced by the engine's (in client-wall units, engine seconds / scale, as the
    rest of the bench expects; engine time e0 was wall time t0). Kept as the client saw it when the engine's
    arrival is not the client's (a P/D decode request: its prefill ran elsewhere) or it did not finish."""
    first, last, emits = times.get("first_token_s"), times.get("last_token_s"), times.get("emits") or []
    if times.get("remote_prefill") or not times.get("finished") or first is None or last is None:
        return record
    arrival = float(times["arrival_s"])
    steps = [float(t) for t, _ in emits]
    gap = max((b - a for a, b in itertools.pairwise(steps)), default=0.0)
    return dataclasses.replace(
        record,
        sent_at=t0 + (arrival - e0) / scale,
        ttft_s=(first - arrival) / scale,
        latency_s=(last - arrival) / scale,
        decode_s=(last - first) / scale,
        max_gap_s=gap / scale,
        chunk_times=tuple(t0 + (t - e0) / scale for t in steps) if record.chunk_times else (),
        engine_clock=True,
    )
