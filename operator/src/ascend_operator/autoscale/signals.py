"""The engine figures the autoscaler reads that the status does not already compute: TTFT p90 over the
service's recent scrapes, from the engines' own histograms (bucket increases over the window, merged over
pods: a quantile of the service's requests, not an average of the pods' quantiles)."""

from collections.abc import Sequence

from ascend_operator.health.aggregate import WINDOW_SECONDS
from ascend_operator.health.rates import bucket_delta, quantile
from ascend_operator.health.samples import Buckets, EngineSample


def ttft_quantile(pods: Sequence[Sequence[EngineSample]], *, now: float, q: float = 0.9) -> float | None:
    """TTFT quantile `q` of the requests that got their first token over the last window; None without any."""
    merged: dict[float, float] = {}
    for samples in pods:
        recent = [s for s in samples if s.t >= now - WINDOW_SECONDS]
        if len(recent) < 2:
            continue
        for bound, count in bucket_delta(recent[0].ttft, recent[-1].ttft):
            merged[bound] = merged.get(bound, 0.0) + count
    buckets: Buckets = tuple(sorted(merged.items()))
    return quantile(buckets, q) if buckets and buckets[-1][1] > 0 else None
