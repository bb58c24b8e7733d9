"""The startup grace: an engine that never served and started less than `startupGraceSeconds` ago is loading.

Why one rule: the health loop reports a loading engine (the `ascend_operator_engine_loading` series, so an
alert on engines not answering leaves it out) and the disruption decision refuses to roll one
(`InStartupGrace`); both must agree on when loading ends, or a pod counts as loading for one and as stuck
for the other. ~292 GB of weights load for minutes and the engine answers nothing meanwhile; the grace ends
early once the pod has been Ready. Pure: times are epoch seconds passed in.
"""

from ascend_operator.api.health import HealthSpec


def in_startup_grace(started_at: float | None, *, served: bool, now: float, cfg: HealthSpec) -> bool:
    """Never Ready and inside the startup grace (a pod without a start time has not started: inside)."""
    loading = started_at is None or now - started_at < cfg.startup_grace_seconds
    return loading and not served
