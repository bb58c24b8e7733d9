"""The drift detector: the seed's 18% loss at constant load rolls, load swings and acceptance changes do not."""

from collections.abc import Callable
from dataclasses import replace

import pytest

from ascend_operator.api.health import DriftSpec
from ascend_operator.health.drift import Baseline, StepWindow, busy_windows, detect_drift
from ascend_operator.health.samples import EngineSample, RankSample
from harness.traces import long_prefill, steady
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


def prefill_beside_decodes(
    start: EngineSample, seconds: float, *, decoding: int, chunk_seconds: float, complete_every: float | None = None
) -> list[EngineSample]:
    """Long prompts prefilled one after another in 8192-token chunks, one chunk in every step beside
    `decoding` requests (each step takes `chunk_seconds`): on vLLM 0.25.1 the prefilling request is running
    but returns nothing, and prompt tokens move only when a prompt completes (every `complete_every` s)."""
    out, t, steps, gen, accepted, prompt = [], start.t, 0.0, 0.0, 0.0, 0.0
    last_done = start.t
    while t < start.t + seconds:
        t += 5.0
        steps += 5.0 / chunk_seconds
        accepted += 5.0 / chunk_seconds * decoding * 0.45 * 7 * 0.3
        gen = steps * decoding + accepted
        if complete_every is not None and t - last_done >= complete_every:
            prompt, last_done = prompt + 524_288, t
        out.append(
            replace(
                start,
                t=t,
                running=decoding + 1,
                iterations=start.iterations + int(steps),
                generation_tokens=start.generation_tokens + int(gen),
                spec_accepted=(start.spec_accepted or 0) + int(accepted),
                prompt_tokens=start.prompt_tokens + prompt,
            )
        )
    return out


def test_steps_carrying_a_running_prefill_chunk_are_not_compared() -> None:
    """An 8192-token chunk in every step beside 8 decodes, no prefill completed yet: no prompt token moved,
    yet the steps are the chunk's, not the decodes'."""
    trace = prefill_beside_decodes(steady(5, batch=9)[0], 120, decoding=8, chunk_seconds=2.3)
    assert busy_windows(trace, window_seconds=30) == []


def test_a_stream_of_512k_prompts_beside_decodes_does_not_trigger_after_a_learned_baseline() -> None:
    warm = steady(1200, batch=9)
    busy = prefill_beside_decodes(warm[-1], 1800, decoding=8, chunk_seconds=2.3, complete_every=150)
    assert first_drift(warm + busy, CFG) is None


def test_decode_windows_of_a_dp2_pod_are_still_compared() -> None:
    """The pod's sample sums both ranks' steps and running requests: 2 x 16 decoding is no prefill."""
    ranks = {"0": RankSample(), "1": RankSample()}
    trace = [
        EngineSample(t=t, running=32, iterations=2 * t / 0.0355, generation_tokens=32 * t / 0.0355, ranks=ranks)
        for t in (0.0, 10.0, 20.0, 30.0)
    ]
    assert [w.batch for w in busy_windows(trace, window_seconds=30)] == [32]
