"""The bench's TTFT/TPOT quantiles are Prometheus' histogram_quantile, checked on Prometheus' own vectors.

Why it exists: `aisctl bench` reports p50/p99 from the engine's histograms, and a user compares them with the
same query on their Grafana; the bench and the operator (health/rates.py) share one implementation, which
must give what Prometheus gives, including the edge the two copies used to disagree on (a bucket with no
observations: rank 0 over an empty lowest bucket, which Prometheus answers with NaN, not a bound).
Expected values: Prometheus 3.16.0 (module v0.316.0) promql/promqltest/testdata/histograms.test,
`testhistogram3` at 50m, whose `histogram_quantile` results are listed there.
"""

from __future__ import annotations

import pytest

from ascend_operator.bench import snapshots as m
from ascend_operator.health.rates import quantile

INF = float("inf")
# testhistogram3 at 50m (0+Nx10 series): cumulative counts by upper bound.
POSITIVE = ((0.0, 0.0), (0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (INF, 110.0))
NEGATIVE = ((-0.25, 0.0), (-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (INF, 20.0))


def _exposition(buckets: tuple[tuple[float, float], ...]) -> str:
    name = m.TTFT
    lines = [f"# TYPE {name} histogram"]
    for bound, count in buckets:
        le = "+Inf" if bound == INF else repr(bound)
        lines.append(f'{name}_bucket{{engine="0",le="{le}",model_name="m"}} {count}')
    lines += [
        f'{name}_count{{engine="0",model_name="m"}} {buckets[-1][1]}',
        f'{name}_sum{{engine="0",model_name="m"}} 1',
    ]
    return "\n".join(lines) + "\n"


EMPTY = m.parse_metrics(f"# TYPE {m.TTFT} histogram\n")


@pytest.mark.parametrize(
    ("buckets", "q", "prometheus"),
    [
        (POSITIVE, 0.0, 0.0),
        (POSITIVE, 0.25, 0.055),
        (POSITIVE, 0.5, 0.125),
        (POSITIVE, 0.75, 0.45),
        (POSITIVE, 1.0, 1.0),
        (NEGATIVE, 0.0, -0.25),
        (NEGATIVE, 0.25, -0.225),
        (NEGATIVE, 0.5, -0.2),
        (NEGATIVE, 0.75, -0.15),
        (NEGATIVE, 1.0, -0.1),
    ],
)
def test_bench_quantile_is_prometheus_histogram_quantile(
    buckets: tuple[tuple[float, float], ...], q: float, prometheus: float
) -> None:
    h = m.histogram_delta(EMPTY, m.parse_metrics(_exposition(buckets)), m.TTFT)
    assert h.quantile(q) == pytest.approx(prometheus)
    assert quantile(buckets, q) == pytest.approx(prometheus)


def test_rank_zero_over_an_empty_lowest_bucket_has_no_figure() -> None:
    # Prometheus: bucketStart 0 + (1 - 0) * (0 / 0) = NaN (promql/quantile.go:172); not 0 s, not 1 s.
    buckets = ((1.0, 0.0), (2.0, 4.0), (INF, 4.0))
    assert quantile(buckets, 0.0) is None
    assert m.histogram_delta(EMPTY, m.parse_metrics(_exposition(buckets)), m.TTFT).quantile(0.0) is None
    assert quantile(buckets, 0.5) == pytest.approx(1.5)  # the same buckets at a positive rank interpolate


def test_observations_past_the_highest_bound_answer_that_bound() -> None:
    buckets = ((1.0, 1.0), (2.0, 2.0), (INF, 10.0))
    assert quantile(buckets, 0.99) == 2.0  # Prometheus: buckets[len-2].UpperBound


def test_the_bench_reads_the_exposed_counter_samples_of_the_contracts_metrics() -> None:
    assert (m.GENERATION_TOKENS, m.REQUEST_SUCCESS) == ("vllm:generation_tokens_total", "vllm:request_success_total")
