"""Scheduled recycling: is a pod old enough, and are we inside the maintenance window? Pure.

The seed's long-uptime drift (~820 -> ~695 tok/s, ~18%) went away with a container restart; periodic
recycling is the practical remedy it names (docs/FACTS.md "Operations").
"""

import datetime

from ascend_operator.api.health import RecycleSpec


def in_window(now: float, cfg: RecycleSpec) -> bool:
    """Whether `now` (epoch seconds) falls inside the daily UTC maintenance window."""
    moment = datetime.datetime.fromtimestamp(now, datetime.UTC)
    hour, minute = (int(x) for x in cfg.window_start_utc.split(":"))
    minutes = moment.hour * 60 + moment.minute
    start = hour * 60 + minute
    return (minutes - start) % (24 * 60) < cfg.window_minutes


def recycle_due(*, started_at: float | None, now: float, cfg: RecycleSpec) -> bool:
    """True when the pod exceeds the maximum age and the window is open."""
    if cfg.max_age_hours is None or started_at is None:
        return False
    return now - started_at >= cfg.max_age_hours * 3600 and in_window(now, cfg)
