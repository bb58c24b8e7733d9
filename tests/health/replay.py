"""Replay a trace through the drift detector the way the operator runs it: one scrape at a time."""

from ascend_operator.api.health import DriftSpec
from ascend_operator.health.drift import DriftTracker, detect_drift, track
from ascend_operator.health.samples import EngineSample


def first_drift(trace: list[EngineSample], cfg: DriftSpec, *, ready_at: float = 0.0) -> float | None:
    """Time of the first drift verdict, evaluating at every scrape."""
    state = DriftTracker()
    for sample in trace:
        state = track(state, sample, ready_at=ready_at, cfg=cfg)
        if detect_drift(state.baseline, state.windows, now=sample.t, cfg=cfg).drifted:
            return sample.t
    return None
