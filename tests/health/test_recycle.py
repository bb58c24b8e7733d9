"""Scheduled recycling: old pods are recycled only inside the maintenance window."""

import datetime

import pytest

from ascend_operator.api.health import RecycleSpec
from ascend_operator.health.recycle import in_window, recycle_due


def at(hour: int, minute: int = 0) -> float:
    return datetime.datetime(2026, 11, 29, hour, minute, tzinfo=datetime.UTC).timestamp()


@pytest.mark.parametrize(
    ("start", "minutes", "now", "inside"),
    [("02:00", 120, at(2, 30), True), ("02:00", 120, at(4, 0), False), ("23:00", 120, at(0, 30), True),
     ("23:00", 120, at(1, 0), False), ("02:00", 120, at(1, 59), False)],
)  # fmt: skip
def test_window_wraps_midnight(start: str, minutes: int, now: float, inside: bool) -> None:
    assert in_window(now, RecycleSpec(window_start_utc=start, window_minutes=minutes)) is inside


def test_recycle_needs_age_and_window() -> None:
    cfg = RecycleSpec(max_age_hours=24)
    assert recycle_due(started_at=at(2) - 25 * 3600, now=at(2, 30), cfg=cfg)
    assert not recycle_due(started_at=at(2) - 25 * 3600, now=at(12), cfg=cfg)  # outside the window
    assert not recycle_due(started_at=at(2) - 3600, now=at(2, 30), cfg=cfg)  # too young
    assert not recycle_due(started_at=at(2) - 25 * 3600, now=at(2, 30), cfg=RecycleSpec())  # off by default
