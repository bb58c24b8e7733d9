"""The drift detector: the seed's 18% loss at constant load rolls, load swings and acceptance changes do not."""

from collections.abc import Callable
from dataclasses import replace

import pytest

from ascend_operator.api.health import DriftSpec
from ascend_operator.health.drift import Baseline, StepWindow, busy_windows, detect_drift
from bench.traces import long_prefill, steady
from tests.health.replay import first_drift

CFG = DriftSpec()
HOUR = 3600.0


def ramp(start: float, fraction: float, period: float) -> Callable[[float], float]:
    return lambda t: 1.0 if t < start else 1.0 + fraction * min(1.0, (t - start) / period)


def test_seed_18_percent_drift_at_constant_load_is_caught_within_10_minutes() -> None:
    start = 1200.0
    trace = steady(start + 1200, batch=32, slowdown=ramp(start, 0.18, 600))
    caught = first_drift(trace, CFG)
    assert caught is not None
    assert start < caught <= start + 600


def test_sudden_18_percent_step_is_caught_fast() -> None:
    trace = steady(2400, batch=16, slowdown=lambda t: 1.18 if t >= 1200 else 1.0)
    caught = first_drift(trace, CFG)
    assert caught is not None
    assert caught - 1200 <= CFG.sustain_seconds + 2 * CFG.sample_window_seconds


@pytest.mark.parametrize(
    ("name", "batch"),
    [
        ("constant C32", lambda t: 32),
        ("load steps C1 -> C64 -> C8", lambda t: 1 if t < 1200 else (64 if t < 2400 else 8)),
        ("bursty C1..C64 every 10 minutes", lambda t: [1, 8, 16, 32, 64][int(t // 600) % 5]),
    ],
)
def test_load_swings_do_not_trigger(name: str, batch: Callable[[float], int]) -> None:
    assert first_drift(steady(3 * HOUR, batch=batch), CFG) is None, name


def test_acceptance_drop_from_45_to_16_6_percent_does_not_trigger() -> None:
    trace = steady(2 * HOUR, batch=32, acceptance=lambda t: 0.45 if t < HOUR else 0.166)
    assert first_drift(trace, CFG) is None


def test_long_prefill_windows_are_not_compared() -> None:
    trace = long_prefill(524_288, tail=0)
    assert busy_windows(trace, window_seconds=30) == []  # KV grows, steps advance, no token comes out


def test_a_512k_prefill_after_a_learned_baseline_does_not_trigger() -> None:
    warm = steady(1200, batch=1)
    end = warm[-1]
    prefill = [
        replace(
            s,
            t=s.t + end.t,
            iterations=s.iterations + end.iterations,
            prompt_tokens=s.prompt_tokens + end.prompt_tokens,
            generation_tokens=s.generation_tokens + end.generation_tokens,
        )
        for s in long_prefill(524_288)[1:]
    ]
    assert first_drift(warm + prefill, CFG) is None


def test_no_judgement_during_warmup_or_without_baseline() -> None:
    trace = steady(900, batch=32, slowdown=lambda t: 1.0 if t < 200 else 1.3)
    assert first_drift(trace, CFG) is None  # the baseline would only start at 300 s


def test_unseen_batch_size_is_interpolated_only_between_close_neighbours() -> None:
    base = Baseline(points={8: (0.0275,) * 4, 16: (0.0355,) * 4, 64: (0.054,) * 4})
    assert base.reference(12, needed=4) == pytest.approx(0.0315)
    assert base.reference(40, needed=4) is None  # 16 and 64 are 4x apart
    assert base.reference(8, needed=5) is None  # not enough points yet


def test_disabled_never_fires() -> None:
    windows = [StepWindow(t_end=float(t), batch=8, step_seconds=1.0) for t in range(0, 300, 30)]
    base = Baseline(points={8: (0.01,) * 4})
    assert detect_drift(base, windows, now=300, cfg=DriftSpec(enabled=False)).drifted is False
    assert detect_drift(base, windows, now=300, cfg=CFG).drifted is True
