"""A slow pass's line (controller/laps.py): the laps that explain it, slowest first, and a retried pass
counted from its own start."""

import pytest

from ascend_operator.controller.laps import Laps


def _timed(*phases: tuple[str, float]) -> Laps:
    clock = [0.0]
    laps = Laps(clock=lambda: clock[0])
    laps.start()
    for name, took in phases:
        clock[0] += took
        laps.lap(name)
    return laps


def test_the_line_names_the_slow_laps_slowest_first_and_adds_up_repeats() -> None:
    laps = _timed(("pods", 0.05), ("engines", 4.0), ("router", 0.3), ("engines", 2.5), ("status patch", 1.2))
    assert laps.summary() == "engines 6.5s, status patch 1.2s, router 0.3s"
    assert laps.total() == pytest.approx(8.05)


def test_a_pass_with_no_visible_lap_says_so() -> None:
    assert _timed(("pods", 0.02), ("status", 0.01)).summary() == "no phase over 0.1s"


def test_a_retried_pass_starts_from_zero() -> None:
    laps = _timed(("pods", 9.0))
    laps.start()
    laps.lap("pods")
    assert (laps.summary(), laps.total()) == ("no phase over 0.1s", 0.0)
