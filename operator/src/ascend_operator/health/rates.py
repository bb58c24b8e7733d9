"""Rates and quantiles from counter and histogram samples, with counter resets handled.

A counter that goes down was reset (the engine restarted): the increase across the reset is the new
value, as Prometheus' `increase()` treats it. Quantiles come from the engine's own histograms (docs/FACTS.md
pitfall 2: client-side first-chunk TTFT was 8.5-12 s while the engine's was 1.09-1.89 s).
"""

import itertools
from collections.abc import Callable, Sequence

from ascend_operator.health.samples import Buckets, EngineSample


def increase(samples: Sequence[EngineSample], read: Callable[[EngineSample], float]) -> float:
    """Total increase of a counter over consecutive samples, across resets."""
    total = 0.0
    for before, after in itertools.pairwise(samples):
        a, b = read(before), read(after)
        total += b - a if b >= a else b
    return total


def rate(samples: Sequence[EngineSample], read: Callable[[EngineSample], float]) -> float | None:
    """Per-second increase over the samples; None with fewer than two samples or no elapsed time."""
    if len(samples) < 2 or samples[-1].t <= samples[0].t:
        return None
    return increase(samples, read) / (samples[-1].t - samples[0].t)


def bucket_delta(before: Buckets, after: Buckets) -> Buckets:
    """Histogram observations between two scrapes (the later one alone after a reset)."""
    old = dict(before)
    if any(count < old.get(bound, 0.0) for bound, count in after):
        return after
    return tuple((bound, count - old.get(bound, 0.0)) for bound, count in after)


def quantile(buckets: Buckets, q: float) -> float | None:
    """The q-quantile by linear interpolation inside the bucket, as Prometheus' histogram_quantile.

    As Prometheus 3.16's BucketQuantile (promql/quantile.go:153-173): the first bucket whose count reaches
    the rank holds it; the +Inf bucket answers the highest finite bound; a lowest bucket with a bound <= 0
    answers that bound (there is no lower edge to interpolate from); rank 0 over an empty lowest bucket is
    0/0 there, NaN, so no figure here (None), never a bound.
    """
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for i, (bound, count) in enumerate(buckets):
        if count >= rank:
            if bound == float("inf"):
                return lower_bound
            if i == 0 and bound <= 0:
                return bound
            span = count - lower_count  # 0 only for rank 0 over an empty lowest bucket
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / span if span > 0 else None
        lower_bound, lower_count = bound, count
    return lower_bound


def acceptance(samples: Sequence[EngineSample]) -> tuple[float | None, dict[int, float]]:
    """Speculative acceptance length (1 + accepted / drafts) and per-position acceptance over the samples."""
    if len(samples) < 2 or samples[-1].spec_drafts is None:
        return None, {}
    drafts = increase(samples, lambda s: s.spec_drafts or 0.0)
    if drafts <= 0:
        return None, {}
    accepted = increase(samples, lambda s: s.spec_accepted or 0.0)
    positions = sorted((samples[-1].spec_accepted_per_pos or {}).keys())
    per_pos = {pos: increase(samples, _position_reader(pos)) / drafts for pos in positions}
    return 1.0 + accepted / drafts, per_pos


def _position_reader(position: int) -> Callable[[EngineSample], float]:
    def read(sample: EngineSample) -> float:
        return (sample.spec_accepted_per_pos or {}).get(position, 0.0)

    return read
