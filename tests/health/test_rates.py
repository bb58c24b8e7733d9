"""Rates across counter resets and quantiles from the engine's own histograms."""

import pytest

from ascend_operator.health.rates import acceptance, bucket_delta, increase, quantile, rate
from ascend_operator.health.samples import EngineSample


def test_increase_survives_an_engine_restart() -> None:
    samples = [EngineSample(t=0, generation_tokens=100), EngineSample(t=5, generation_tokens=150),
               EngineSample(t=10, generation_tokens=20), EngineSample(t=15, generation_tokens=70)]  # fmt: skip
    assert increase(samples, lambda s: s.generation_tokens) == 50 + 20 + 50
    assert rate(samples, lambda s: s.generation_tokens) == pytest.approx(120 / 15)
    assert rate(samples[:1], lambda s: s.generation_tokens) is None


def test_quantile_interpolates_like_prometheus() -> None:
    buckets = ((0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (float("inf"), 40.0))
    assert quantile(buckets, 0.5) == pytest.approx(0.3)  # rank 20 halfway through (0.1, 0.5]
    assert quantile((), 0.5) is None
    assert bucket_delta(((1.0, 5.0), (float("inf"), 5.0)), ((1.0, 8.0), (float("inf"), 9.0))) == (
        (1.0, 3.0),
        (float("inf"), 4.0),
    )


def test_acceptance_length_and_per_position() -> None:
    before = EngineSample(t=0, spec_drafts=0, spec_accepted=0, spec_accepted_per_pos={0: 0, 1: 0})
    after = EngineSample(t=5, spec_drafts=100, spec_accepted=82, spec_accepted_per_pos={0: 53, 1: 29})
    length, per_pos = acceptance([before, after])
    assert length == pytest.approx(1.82)
    assert per_pos == {0: pytest.approx(0.53), 1: pytest.approx(0.29)}
    assert acceptance([EngineSample(t=0), EngineSample(t=5)]) == (None, {})
