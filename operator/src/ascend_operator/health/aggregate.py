"""Service-level engine figures for the status, from every pod's recent scrapes. Pure.

Tokens/s and preemptions are counter increases over the last window (resets handled), TTFT and TPOT p50
come from the engines' own histograms (docs/FACTS.md pitfall 2), KV usage is the fullest pod, acceptance
length is 1 + accepted / drafts and per-position acceptance is accepted-at-position / drafts.
"""

from collections.abc import Sequence

from ascend_operator.api.status import EngineMetrics, LiveStatus
from ascend_operator.health.rates import acceptance, bucket_delta, increase, quantile, rate
from ascend_operator.health.samples import Buckets, EngineSample

#: Seconds of scrapes the figures are computed over.
WINDOW_SECONDS = 30.0


def _recent(samples: Sequence[EngineSample], now: float) -> list[EngineSample]:
    return [s for s in samples if s.t >= now - WINDOW_SECONDS]


def _merge(total: Buckets, add: Buckets) -> Buckets:
    merged = dict(total)
    for bound, count in add:
        merged[bound] = merged.get(bound, 0.0) + count
    return tuple(sorted(merged.items()))


def service_metrics(pods: Sequence[Sequence[EngineSample]], *, now: float) -> LiveStatus:
    """`status.metrics` and the printer-column strings (all None: no pod has two recent scrapes, so the
    stored figures are cleared). A figure that cannot be computed is left out of `metrics`."""
    windows = [w for w in (_recent(p, now) for p in pods) if len(w) >= 2]
    if not windows:
        return LiveStatus(metrics=None, tokens_per_second_display=None, kv_cache_usage_display=None)
    tokens = sum(r for w in windows if (r := rate(w, lambda s: s.generation_tokens)) is not None)
    ttft: Buckets = ()
    tpot: Buckets = ()
    for w in windows:
        ttft = _merge(ttft, bucket_delta(w[0].ttft, w[-1].ttft))
        tpot = _merge(tpot, bucket_delta(w[0].tpot, w[-1].tpot))
    lengths = [acceptance(w) for w in windows]
    spec = [length for length, _ in lengths if length is not None]
    per_pos = lengths[0][1] if len(lengths) == 1 else {}
    kv = max(w[-1].kv_usage for w in windows)
    metrics = {
        "tokensPerSecond": round(tokens, 1),
        "runningRequests": int(sum(w[-1].running for w in windows)),
        "waitingRequests": int(sum(w[-1].waiting for w in windows)),
        "kvCacheUsage": round(kv, 4),
        "ttftP50Seconds": _round(quantile(ttft, 0.5)),
        "tpotP50Seconds": _round(quantile(tpot, 0.5)),
        "acceptanceLength": round(sum(spec) / len(spec), 3) if spec else None,
        "acceptancePerPosition": [round(per_pos[p], 4) for p in sorted(per_pos)] if per_pos else None,
        "preemptions": int(sum(increase(w, lambda s: s.preemptions) for w in windows)),
    }
    return LiveStatus(
        metrics=EngineMetrics.model_validate({k: v for k, v in metrics.items() if v is not None}),
        tokens_per_second_display=f"{tokens:.1f}",
        kv_cache_usage_display=f"{kv:.1%}",
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
