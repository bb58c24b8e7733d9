"""The autoscaler's decision (ascend_operator.autoscale): table tests over frozen time, one pass per
scrape interval, as the health loop feeds it. What a user would notice: a second replica under a queue
that lasts and none under a burst, no flapping on load that wobbles, one replica back after an idle
window, never a Pending pile when the NPUs are gone, never a scale-down that leaves nothing Ready."""

import itertools
from collections.abc import Sequence
from typing import Any

import pytest

from ascend_operator.api.autoscaling import AutoscalingSpec, AutoscalingTargets, ScaleReason
from ascend_operator.autoscale import ScaleHistory, Signals, decide, observe, ttft_quantile, wanted
from ascend_operator.health.samples import EngineSample

SPEC = AutoscalingSpec(
    min_replicas=1,
    max_replicas=3,
    scale_up_window_seconds=30,
    panic_window_seconds=6,
    scale_down_window_seconds=120,
)
SLOTS = 8
STEP = 5.0  # the health loop's default scrape interval


def busy(replicas: int, demand: float, *, ready: int | None = None, **more: object) -> Signals:
    """A pass with `demand` requests (running up to the slots, the rest waiting)."""
    ready = replicas if ready is None else ready
    running = min(demand, ready * SLOTS)
    fields: dict[str, object] = {
        "replicas": replicas,
        "ready": ready,
        "answering": ready,
        "running": running,
        "waiting": demand - running,
        "slots": SLOTS,
    }
    fields.update(more)
    return Signals(**fields)  # type: ignore[arg-type]


def run(
    loads: Sequence[float], *, replicas: int = 1, spec: AutoscalingSpec = SPEC, start: float = 1000.0, **more: Any
) -> list[tuple[float, int, ScaleReason]]:
    """Feed one pass per STEP with these demands, applying each decision as the controller does."""
    window, out, now = ScaleHistory(), [], start
    for demand in loads:
        s = busy(replicas, demand, **more)
        window = observe(window, s, spec, now=now)
        d = decide(s, window, spec, now)
        if d.desired != replicas:
            window = ScaleHistory(window.wants, last_scale=now, scaled_down=d.desired < replicas)
            replicas = d.desired
        out.append((now, replicas, d.reason))
        now += STEP
    return out


def scale_steps(trace: list[tuple[float, int, ScaleReason]]) -> list[int]:
    counts = [n for _, n, _ in trace]
    return [b for a, b in itertools.pairwise(counts) if a != b]


def test_a_queue_that_lasts_adds_a_replica_after_the_stable_window() -> None:
    # 8 slots + 2 waiting per replica: 14 requests want 2 replicas
    trace = run([14] * 12)
    first = next(t for t, n, _ in trace if n == 2)
    assert first - trace[0][0] == pytest.approx(30)
    assert scale_steps(trace) == [2]
    assert next(r for _, n, r in trace if n == 2) is ScaleReason.SCALE_UP


def test_a_burst_shorter_than_the_window_adds_nothing() -> None:
    trace = run([14] * 5 + [3] * 20)  # 25 s of queue, then 3 requests
    assert scale_steps(trace) == []


def test_noise_around_the_threshold_never_flaps() -> None:
    # one replica's worth and a bit over, alternating: never a full window above, never one below
    trace = run([9, 12, 10, 11, 9, 12] * 20, replicas=1)
    assert scale_steps(trace) == []
    # two replicas carrying between one and two replicas' worth: wobble never takes one away
    trace = run([11, 20, 8, 14] * 40, replicas=2)
    assert scale_steps(trace) == []


def test_far_behind_scales_up_in_the_panic_window() -> None:
    trace = run([40] * 4)  # wants 3 (ceil(40 / 10)) >= twice 1
    first = next((t, n, r) for t, n, r in trace if n > 1)
    assert first[0] - trace[0][0] == pytest.approx(10)  # panic window 6 s covered at the third pass
    assert first[1:] == (3, ScaleReason.PANIC_SCALE_UP)


def test_idle_returns_to_one_after_the_scale_down_window_and_not_before() -> None:
    trace = run([14] * 8 + [0] * 40)
    up = next(t for t, n, _ in trace if n == 2)
    down = next(t for t, n, _ in trace if t > up and n == 1)
    # the last busy want at t0+35; every want since t0+40 is 1: down once 120 s of wants are all 1
    assert down - up >= SPEC.scale_down_window_seconds
    assert down - up <= SPEC.scale_down_window_seconds + 2 * STEP
    assert scale_steps(trace) == [2, 1]
    assert next(r for t, n, r in trace if t == down) is ScaleReason.SCALE_DOWN


def test_a_load_falling_through_two_replicas_worth_is_at_one_a_window_after_idle_not_two() -> None:
    # three replicas' worth (30 requests: 3 x (8 + 2)), then two's (15) for 30 s, then idle: the window first
    # takes 3 -> 2 (it still holds the 15s), then 2 -> 1 once it holds only idle wants; the first
    # scale-down does not hold the second back another window (ramp at the seed's figures, 2026-12-05: 3 -> 2
    # -> 1 took 560 s from idle with that hold, the issue asks for one replica within ten minutes of idle)
    trace = run([30] * 20 + [15] * 6 + [0] * 60)
    idle = trace[26][0]
    assert scale_steps(trace) == [3, 2, 1]
    one = next(t for t, n, _ in trace if t > idle and n == 1)
    assert one - idle <= SPEC.scale_down_window_seconds + 2 * STEP
    two = next(t for t, n, _ in trace if t > trace[20][0] and n == 2)
    assert one - two < SPEC.scale_down_window_seconds  # not a window after the first step


def test_never_below_min_nor_above_max() -> None:
    assert scale_steps(run([0] * 60, replicas=1)) == []
    assert max(n for _, n, _ in run([500] * 30)) == SPEC.max_replicas
    s = busy(5, 0)
    assert decide(s, ScaleHistory(), SPEC, 0.0).desired == 3
    assert decide(s, ScaleHistory(), SPEC, 0.0).reason is ScaleReason.OUT_OF_BOUNDS


def test_a_replica_still_loading_is_coming_capacity_not_missing() -> None:
    # 2 replicas asked, 1 Ready, 1 loading: the queue wants 2, which are asked already
    trace = run([14] * 20, replicas=2, ready=1, loading=1)
    assert scale_steps(trace) == []
    # TTFT over target with one Ready wants Ready + 1 = 2, not 3
    spec = SPEC.model_copy(update={"targets": AutoscalingTargets(ttft_p90_seconds=1.0)})
    trace = run([4] * 20, replicas=2, ready=1, loading=1, ttft_p90=3.0, spec=spec)
    assert scale_steps(trace) == []


def test_no_replica_the_npus_cannot_place() -> None:
    trace = run([30] * 20, replicas=2, ready=1, unplaceable=1)
    assert scale_steps(trace) == []
    assert trace[-1][2] is ScaleReason.NO_CAPACITY


def test_scale_down_waits_until_the_kept_replicas_are_ready() -> None:
    window = ScaleHistory(wants=((0.0, 1), (200.0, 1)))
    s = busy(2, 0, ready=0, answering=1, loading=2)
    d = decide(s, window, SPEC, 200.0)
    assert (d.desired, d.reason) == (2, ScaleReason.NOT_READY)


def test_no_answer_holds() -> None:
    s = Signals(replicas=2, ready=0, loading=2, answering=0)
    d = decide(s, observe(ScaleHistory(), s, SPEC, now=0.0), SPEC, 0.0)
    assert (d.desired, d.reason) == (2, ScaleReason.NO_SIGNAL)


def test_another_autoscaler_is_not_fought() -> None:
    trace = run([40] * 20, other_autoscaler="llm")
    assert scale_steps(trace) == []
    assert trace[-1][2] is ScaleReason.OTHER_AUTOSCALER


@pytest.mark.parametrize(
    ("signals", "want"),
    [
        (busy(1, 10), 1),  # exactly one replica's worth
        (busy(1, 11), 2),
        (busy(2, 0, kv_usage=0.95), 3),  # two Ready at 95 % over a 90 % target
        (busy(1, 0, kv_usage=0.9), 1),
        (busy(1, 0, ttft_p90=5.0), 1),  # no TTFT target: TTFT does not scale
    ],
)
def test_what_one_pass_wants(signals: Signals, want: int) -> None:
    assert wanted(signals, SPEC)[0] == want


def test_ttft_p90_from_the_histograms_of_every_pod() -> None:
    def sample(t: float, fast: float, slow: float) -> EngineSample:
        return EngineSample(t=t, ttft=((0.5, fast), (4.0, fast + slow), (float("inf"), fast + slow)))

    pods = [[sample(0, 0, 0), sample(10, 80, 0)], [sample(0, 0, 0), sample(10, 0, 20)]]
    p90 = ttft_quantile(pods, now=10.0)
    assert p90 is not None
    assert 0.5 < p90 <= 4.0
    assert ttft_quantile([[sample(0, 5, 0), sample(10, 5, 0)]], now=10.0) is None  # none in the window
