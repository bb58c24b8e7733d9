"""perf/ramp_figures.py: the ramp benchmark's figures from its rows, as docs/autoscaling.md defines them. What
a reader of the figures would notice if they were wrong: a burst counted as a sustained queue, a scale-down
dated from the wrong moment, NPU-hours that ignore pods still holding NPUs."""

from perf.ramp_figures import Counts, Sample, figures, ttft_over


def _row(t: float, *, bound: int, ready: int | None = None, waiting: float = 0.0) -> Sample:
    return Sample(t=t, spec_replicas=bound, bound=bound, ready=bound if ready is None else ready, waiting=waiting,
                  running=0.0)  # fmt: skip


def test_figures_from_a_ramp() -> None:
    rows = [
        _row(0, bound=1),
        _row(10, bound=1, waiting=3),  # a burst: 10 s of queue, not the 30 that count
        _row(20, bound=1),
        _row(30, bound=1, waiting=5),  # the queue that lasts
        _row(60, bound=1, waiting=9),
        _row(70, bound=2, ready=1, waiting=9),  # the second replica loads: holds NPUs, not Ready
        _row(100, bound=2, ready=2, waiting=1),
        _row(400, bound=2, ready=2),
        _row(700, bound=1),
        _row(800, bound=1),
    ]
    found = figures(rows, ramp_seconds=600, slots=32, max_replicas=4, npus=8)
    assert (found["sustained_queue_at_s"], found["second_ready_at_s"], found["scale_up_s"]) == (30, 100, 70)
    assert (found["one_replica_at_s"], found["scale_down_from_low_s"], found["scale_down_from_idle_s"]) == (
        700,
        220,
        100,
    )
    # 1 pod for 70 s + 2 pods for 630 s + 1 pod for 100 s, 8 NPUs each
    assert found["npu_hours"] == round((70 + 2 * 630 + 100) * 8 / 3600, 3)
    assert found["npu_hours_fixed_max"] == round(4 * 8 * 800 / 3600, 3)
    assert found["npu_hours_fixed_peak"] == round(2 * 8 * 800 / 3600, 3)


def test_requests_over_the_target_sum_every_pod_from_its_first_scrape() -> None:
    pods = {"a": Counts(first=(10, 10), last=(110, 90)), "b": Counts(first=(0, 0), last=(50, 45))}
    assert ttft_over(pods) == {"engine_requests": 150, "ttft_over_target": 25}
