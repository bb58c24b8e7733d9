"""One pod's health state and verdict: pure folds over scrapes and canaries, then a decision.

The verdict sets the pod's readiness gate and may ask for a roll; whether the roll happens is the roll
disruption decision (`ascend_operator.disruption`). Times are the operator's monotonic clock.
"""

from dataclasses import dataclass, field, replace

from ascend_operator.api.health import HealthSpec
from ascend_operator.disruption.model import RollReason
from ascend_operator.health.aggregate import WINDOW_SECONDS
from ascend_operator.health.drift import DriftTracker, detect_drift, track
from ascend_operator.health.samples import EngineSample, advanced
from ascend_operator.health.stall import detect_stall, frozen_span

#: Samples kept per pod at most, whatever the scrape interval (a hard bound on memory).
KEEP_SAMPLES = 240
#: Seconds of samples kept per pod, as a multiple of the stall window (at least the status figures' 30 s
#: window twice): what the detectors read. The drift detector keeps its own windows (health/drift.py).
KEEP_STALL_WINDOWS = 4


@dataclass(frozen=True, kw_only=True)
class PodHealth:
    """What the operator remembers about one pod's engine."""

    samples: tuple[EngineSample, ...] = ()
    drift: DriftTracker = field(default_factory=DriftTracker)
    canary_failures: int = 0
    last_canary: float | None = None
    mismatches: tuple[str, ...] | None = None
    """None until the effective config has been checked; empty when it matched."""
    ready_since: float | None = None
    served: bool = False
    """Ready at least once: the engine finished loading (ends the startup grace early)."""
    gate: tuple[bool, str] | None = None
    """The readiness gate (ready, reason) last written, None when unknown or its write failed."""


@dataclass(frozen=True, kw_only=True)
class CanaryOutcome:
    """One canary, judged against the engine's progress signals scraped right before it was sent and right
    after it ended (its own scrapes, not the pass's: a sample of the pass can predate the canary). Both are
    None for a canary that returned tokens: nothing reads them then."""

    ok: bool
    """Tokens came back within the timeout."""
    before: EngineSample | None
    after: EngineSample | None
    ended: float
    detail: str = ""

    @property
    def queued(self) -> bool:
        """No tokens in time, but the engine advanced meanwhile: busy (queued behind full slots or a long
        chunked prefill), not failing."""
        return not self.ok and advanced(self.before, self.after)


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """Gate state, its reason, and an optional roll request."""

    ready: bool
    reason: str
    message: str
    roll: RollReason | None = None
    evidence: dict[str, float] = field(default_factory=dict)
    ranks: tuple[str, ...] = ()
    """The DP ranks a Stalled verdict found frozen (`engine` label values); empty: the engine as a whole."""


def keep(samples: tuple[EngineSample, ...], sample: EngineSample, *, cfg: HealthSpec) -> tuple[EngineSample, ...]:
    """`samples` plus `sample`, without those older than the detectors read; the first sample of a frozen
    span stays however old, so a long stall still says since when nothing advanced."""
    every = (*samples, sample)[-KEEP_SAMPLES:]
    horizon = sample.t - max(KEEP_STALL_WINDOWS * cfg.stall.window_seconds, 2 * WINDOW_SECONDS)
    recent = next((i for i, s in enumerate(every) if s.t >= horizon), len(every) - 1)
    frozen = len(every) - len(frozen_span(every))
    return (every[frozen], *every[recent:]) if frozen < recent else every[recent:]


def fold_sample(state: PodHealth, sample: EngineSample, *, cfg: HealthSpec) -> PodHealth:
    """Add a scrape."""
    samples = keep(state.samples, sample, cfg=cfg)
    drift = state.drift
    if state.ready_since is not None:
        drift = track(drift, sample, ready_at=state.ready_since, cfg=cfg.drift)
    return replace(state, samples=samples, drift=drift)


def fold_canary(state: PodHealth, outcome: CanaryOutcome) -> PodHealth:
    """Add a canary outcome: tokens, or an engine that advanced while the canary waited, clear the failures;
    no tokens while nothing advanced is one more failure."""
    failures = 0 if outcome.ok or outcome.queued else state.canary_failures + 1
    return replace(state, canary_failures=failures, last_canary=outcome.ended)


def judge(state: PodHealth, *, now: float, cfg: HealthSpec) -> Verdict:
    """The pod's verdict, most serious finding first."""
    if state.mismatches:
        return Verdict(ready=False, reason="ConfigMismatch", message="; ".join(state.mismatches))
    if not state.samples or now - state.samples[-1].t > 3 * cfg.scrape_interval_seconds:
        return Verdict(ready=False, reason="EngineNotAnswering", message="no /metrics answer")
    stall = detect_stall(state.samples, now=now, cfg=cfg.stall, canary_failures=state.canary_failures)
    if stall.stalled:
        return Verdict(
            ready=False,
            reason="Stalled",
            message=stall.message,
            roll=RollReason.STALLED,
            evidence=stall.evidence,
            ranks=stall.ranks,
        )
    if state.mismatches is None:
        return Verdict(ready=False, reason="CheckingConfig", message="effective config not checked yet")
    if state.canary_failures >= cfg.canary.failure_threshold:
        return Verdict(
            ready=False,
            reason="CanaryFailing",
            message=f"{state.canary_failures} canaries without tokens and without forward progress",
        )
    if state.last_canary is None:
        return Verdict(ready=False, reason="AwaitingCanary", message="no canary has run yet")
    if state.canary_failures and state.ready_since is None:
        return Verdict(ready=False, reason="AwaitingCanary", message="the last canary returned no tokens")
    drift = detect_drift(state.drift.baseline, state.drift.windows, now=now, cfg=cfg.drift)
    if drift.drifted:
        evidence = {"stepTimeRatio": round(drift.ratio or 0.0, 3)}
        return Verdict(
            ready=True, reason="ThroughputDrift", message=drift.message, roll=RollReason.DRIFT, evidence=evidence
        )
    return Verdict(ready=True, reason="CanaryPassing", message="tokens come back and the engine advances")


def mark_ready(state: PodHealth, verdict: Verdict, *, now: float) -> PodHealth:
    """Remember since when the pod is ready (drift warm-up counts from there)."""
    if verdict.ready and state.ready_since is None:
        return replace(state, ready_since=now, served=True)
    if not verdict.ready and state.ready_since is not None and verdict.reason != "ThroughputDrift":
        # windows restart from the next Ready; the learned baseline stays (the same engine, just unready)
        return replace(state, ready_since=None, drift=DriftTracker(baseline=state.drift.baseline))
    return state
