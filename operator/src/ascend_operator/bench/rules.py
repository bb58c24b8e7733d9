"""The seed's four benchmark rules as checks over one measured point (pure: observations in, verdicts out).

Why this module exists: docs/FACTS.md "Benchmark pitfalls" are rules, not advice, and a harness that makes
them optional reproduces the seed's lies. Each point a scenario measures becomes a `Batch` (what the
client saw per request, two /metrics scrapes, the wall time) and `summarize` turns it into the point's
figures and checks:

- `requests_succeeded`: every request answered 200 with usage (pitfall 4: never the exit code alone).
- `fixed_output`: every completion has exactly the asked `max_tokens` (sent with `ignore_eos`; pitfall 3).
- `prompt_length`: the engine-counted prompt is within the tolerance of the requested length.
- `engine_finished`: the engine's `vllm:request_success` grew by exactly the requests the client saw
  complete, all with finished_reason `length` (no stop, no error). A request the client gave up on is
  counted here on the client side (`aborted`): vLLM 0.25.1 never counts a client abort in that counter
  (contract.vllm_metrics.REQUEST_SUCCESS; vllm/v1/engine/output_processor.py:450-507).
- `no_engine_restart`: both scrapes answered and no counter went down (a restart resets them).
- `prefix_cache_clean`: the prefix-cache hit delta (`hits / queries` between the scrapes) is near zero
  (pitfall 1: a reused prompt makes TTFT absurdly fast).

Figures: TTFT / TPOT are the engine histograms' deltas (pitfall 2) with the client's beside them. Output
tok/s is the engine's generated-token delta over the run's time. Against aissim (detected by its
/sim/state), times are the simulator's engine seconds: client wall figures are multiplied by its time
scale and throughput uses each engine's busy seconds, so figures compare with the seed's tables.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ascend_operator.bench import snapshots as m
from ascend_operator.bench.prompts import within

DEFAULT_CACHE_THRESHOLD = 0.01  # hit fraction; a fresh-prompt run reads 0 on vLLM and aissim
DEFAULT_LENGTH_TOLERANCE = 0.05


@dataclass(frozen=True)
class RequestRecord:
    """One request as the client saw it. Times are client wall seconds."""

    index: int
    kind: str  # "short" or "long"
    prompt_tokens_requested: int
    max_tokens: int
    ok: bool
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None
    ttft_s: float | None = None
    latency_s: float = 0.0
    decode_s: float | None = None  # first content chunk -> last content chunk
    max_gap_s: float = 0.0  # longest silence between content chunks
    aborted: bool = False  # the client gave up (its timeout) and closed the stream: vLLM aborts it uncounted
    sent_at: float | None = None  # monotonic clock when the request went out (the mixed timeline's x)
    chunk_times: tuple[float, ...] = ()  # monotonic arrival of each content chunk, when traced (the long request)
    response_id: str | None = None  # the response's `id`
    engine_clock: bool = False  # the times were replaced by the engine's own (aissim's GET /sim/requests)


@dataclass(frozen=True)
class Clock:
    """How to turn client wall seconds into the engine's seconds."""

    kind: str  # "wall" (vLLM) or "aissim" (the simulator's scaled engine clock)
    scale: float = 1.0


@dataclass(frozen=True)
class Batch:
    """Raw observations of one measured point."""

    endpoint: str
    label: str
    concurrency: int
    context: int | None
    records: Sequence[RequestRecord]
    before: m.Snapshot | None
    after: m.Snapshot | None
    wall_s: float
    clock: Clock
    scrape_error: str | None = None
    busy_s: Mapping[str, float] | None = None  # aissim: per-engine busy engine seconds during the point
    kv_peak: float | None = None
    running_peak: float | None = None
    started_at: float = 0.0  # monotonic clock when the point's first request went out


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass
class Thresholds:
    cache: float = DEFAULT_CACHE_THRESHOLD
    length: float = DEFAULT_LENGTH_TOLERANCE
    extra: dict[str, float] = field(default_factory=dict)


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[idx]


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def output_tok_s(batch: Batch) -> float | None:
    """Generated tokens per engine second: per engine over its busy time on aissim, else over wall time."""
    if batch.before is None or batch.after is None:
        return None
    if batch.busy_s is not None:
        g0, g1 = batch.before.per_engine(m.GENERATION_TOKENS), batch.after.per_engine(m.GENERATION_TOKENS)
        total = 0.0
        for engine, busy in batch.busy_s.items():
            tokens = g1.get(engine, 0.0) - g0.get(engine, 0.0)
            total += tokens / busy if busy > 0 else 0.0
        return total
    seconds = batch.wall_s * batch.clock.scale
    return m.delta(batch.before, batch.after, m.GENERATION_TOKENS) / seconds if seconds > 0 else None


ENGINE_KEYS = (
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_mean_s",
    "finished",
    "finished_length",
    "prefix_cache_queries",
    "prefix_cache_hits",
    "prefix_cache_hit_rate",
    "preemptions",
)


def engine_figures(batch: Batch) -> dict[str, Any]:
    if batch.before is None or batch.after is None:
        return dict.fromkeys(ENGINE_KEYS)
    b, a = batch.before, batch.after
    ttft = m.histogram_delta(b, a, m.TTFT)
    tpot = m.histogram_delta(b, a, m.TPOT)
    queries = m.delta(b, a, m.PREFIX_QUERIES)
    hits = m.delta(b, a, m.PREFIX_HITS)
    return {
        "ttft_mean_s": _r(ttft.mean),
        "ttft_p50_s": _r(ttft.quantile(0.5)),
        "ttft_p99_s": _r(ttft.quantile(0.99)),
        "tpot_mean_s": _r(tpot.mean, 5),
        "finished": int(m.delta(b, a, m.REQUEST_SUCCESS)),
        "finished_length": int(m.delta(b, a, m.REQUEST_SUCCESS, finished_reason="length")),
        "prefix_cache_queries": int(queries),
        "prefix_cache_hits": int(hits),
        "prefix_cache_hit_rate": round(hits / queries, 4) if queries > 0 else 0.0,
        "preemptions": int(m.delta(b, a, m.PREEMPTIONS)),
    }


def client_figures(records: Sequence[RequestRecord], clock: Clock) -> dict[str, Any]:
    ok = [r for r in records if r.ok]
    ttfts = [r.ttft_s * clock.scale for r in ok if r.ttft_s is not None]
    lat = [r.latency_s * clock.scale for r in ok]
    tpots = [
        r.decode_s * clock.scale / (r.completion_tokens - 1)
        for r in ok
        if r.decode_s is not None and r.completion_tokens > 1
    ]
    return {
        "ttft_mean_s": _r(statistics.fmean(ttfts)) if ttfts else None,
        "ttft_p99_s": _r(_pct(ttfts, 0.99)),
        "tpot_mean_s": _r(statistics.fmean(tpots), 5) if tpots else None,
        "latency_mean_s": _r(statistics.fmean(lat)) if lat else None,
    }


def lengths(records: Sequence[RequestRecord]) -> dict[str, Any]:
    ok = [r for r in records if r.ok]
    prompts = [r.prompt_tokens for r in ok]
    outs = [r.completion_tokens for r in ok]
    return {
        "prompt_tokens_requested": sorted({r.prompt_tokens_requested for r in records}),
        "prompt_tokens_min": min(prompts) if prompts else None,
        "prompt_tokens_max": max(prompts) if prompts else None,
        "prompt_tokens_mean": round(statistics.fmean(prompts), 1) if prompts else None,
        "completion_tokens_requested": sorted({r.max_tokens for r in records}),
        "completion_tokens_min": min(outs) if outs else None,
        "completion_tokens_max": max(outs) if outs else None,
    }


def checks(batch: Batch, figures: Mapping[str, Any], thresholds: Thresholds) -> list[Check]:
    records = batch.records
    failed = [r for r in records if not r.ok]
    ok = [r for r in records if r.ok]
    out = [
        Check(
            "requests_succeeded",
            not failed and bool(records),
            f"{len(ok)}/{len(records)} succeeded" + (f"; first error: {failed[0].error}" if failed else ""),
        )
    ]
    off = [r for r in ok if r.completion_tokens != r.max_tokens]
    out.append(
        Check(
            "fixed_output",
            not off and bool(ok),
            f"{len(off)} of {len(ok)} completions differ from max_tokens"
            + (f" (request {off[0].index}: {off[0].completion_tokens} != {off[0].max_tokens})" if off else ""),
        )
    )
    far = [r for r in ok if not within(r.prompt_tokens, r.prompt_tokens_requested, thresholds.length)]
    out.append(
        Check(
            "prompt_length",
            not far and bool(ok),
            f"{len(far)} prompt(s) outside +-{thresholds.length:.0%} of the requested length"
            + (f" (request {far[0].index}: {far[0].prompt_tokens} vs {far[0].prompt_tokens_requested})" if far else ""),
        )
    )
    if batch.before is None or batch.after is None:
        out.append(Check("no_engine_restart", False, f"metrics scrape failed: {batch.scrape_error}"))
        out.append(Check("engine_finished", False, "no engine count: a metrics scrape failed"))
        out.append(Check("prefix_cache_clean", False, "no prefix-cache delta: a metrics scrape failed"))
        return out
    reset = m.resets(batch.before, batch.after)
    out.append(
        Check(
            "no_engine_restart",
            not reset,
            "no counter went down" if not reset else f"counters reset (engine restarted): {'; '.join(reset[:3])}",
        )
    )
    finished, by_length = figures["finished"], figures["finished_length"]
    aborted = sum(r.aborted for r in records)
    out.append(
        Check(
            "engine_finished",
            finished == len(ok) and by_length == len(ok),
            f"engine finished {finished} (length: {by_length}) of the {len(ok)} the client saw complete"
            + (f"; {aborted} aborted by the client, which vLLM does not count" if aborted else ""),
        )
    )
    rate = figures["prefix_cache_hit_rate"]
    out.append(
        Check(
            "prefix_cache_clean",
            rate <= thresholds.cache,
            f"prefix-cache hits {figures['prefix_cache_hits']} / queries {figures['prefix_cache_queries']} "
            f"= {rate:.2%} (limit {thresholds.cache:.0%})"
            + ("" if rate <= thresholds.cache else ": cache-contaminated, prompts were reused"),
        )
    )
    return out


def summarize(batch: Batch, thresholds: Thresholds) -> dict[str, Any]:
    """A point of the result JSON: identity, figures, and its checks."""
    engine = engine_figures(batch)
    point_checks = checks(batch, engine, thresholds)
    tok_s = output_tok_s(batch)
    return {
        "endpoint": batch.endpoint,
        "label": batch.label,
        "concurrency": batch.concurrency,
        "context": batch.context,
        "requests": len(batch.records),
        "succeeded": sum(r.ok for r in batch.records),
        "aborted": sum(r.aborted for r in batch.records),
        "output_tok_s": _r(tok_s, 2),
        "engine": {**engine, "kv_peak": _r(batch.kv_peak), "running_peak": batch.running_peak},
        "client": client_figures(batch.records, batch.clock),
        "lengths": lengths(batch.records),
        "wall_s": round(batch.wall_s, 3),
        "engine_s": round(batch.wall_s * batch.clock.scale, 3),
        "checks": [c.as_dict() for c in point_checks],
        "ok": all(c.ok for c in point_checks),
    }
