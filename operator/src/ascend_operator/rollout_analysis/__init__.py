"""Whether a new revision's first replica works worse than the previous revision's replicas: pure.

Why here and not in health/: health judges one engine against itself (stalled, drifting, mis-configured);
this judges one revision against another, on the same window of the same live traffic, so the two sides
differ by the spec change and not by the load. The figures come from what the health pass scrapes anyway
(the engine's own histograms and counters, health/samples.py), as increases over the window:

- `figures` reduces each side's scrapes over the window to the signals (TTFT and TPOT p90 from the
  histograms merged over the side's pods, output tokens/s per running request, mean waiting requests per
  replica, canary failures, requests that got a first token, requests finished and those finished with an
  engine error);
- `judge` runs `CHECKS`, an ordered chain of func(input) -> (reason, message, failed, canary, baseline):
  the first that fails decides. `TooLittleTraffic` failing means extend the window, never guess;
  any other failing check means the new revision is worse and goes back.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, NamedTuple

from ascend_operator.api.reasons import RolloutSignal, RollReason, VerdictReason
from ascend_operator.api.rollout import AnalysisThresholds
from ascend_operator.health.rates import bucket_delta, increase, quantile
from ascend_operator.health.samples import Buckets, EngineSample

#: Differences below these are never "worse", whatever the ratio: a 20 ms TTFT against 10 ms is twice as
#: slow and no user notices (the histograms' lowest buckets are 1 ms and 10 ms wide).
MIN_TTFT_DELTA_SECONDS = 0.1
MIN_TPOT_DELTA_SECONDS = 0.005
#: The quantile both latency checks compare.
QUANTILE = 0.9


@dataclass(frozen=True, kw_only=True)
class Figures:
    """One side of the comparison over the window."""

    replicas: int
    seconds: float
    requests: float = 0.0
    """Requests that got their first token in the window (the TTFT histogram's count increase)."""
    ttft_p90: float | None = None
    tpot_p90: float | None = None
    tokens_per_request: float | None = None
    """Output tokens per second per running request (generated tokens' rate over the mean running)."""
    waiting: float = 0.0
    """Mean waiting requests per replica over the window's scrapes."""
    canary_failures: int = 0
    finished: float = 0.0
    """Requests the engine finished in the window, for any reason."""
    errors: float = 0.0
    """Of those, finished with an engine error (vLLM's finished_reason `error`: a 500 to the client)."""

    @property
    def error_rate(self) -> float:
        return self.errors / self.finished if self.finished > 0 else 0.0


def _merged(pods: Sequence[Sequence[EngineSample]], read: Callable[[EngineSample], Buckets]) -> Buckets:
    merged: dict[float, float] = {}
    for samples in pods:
        if len(samples) < 2:
            continue
        for bound, count in bucket_delta(read(samples[0]), read(samples[-1])):
            merged[bound] = merged.get(bound, 0.0) + count
    return tuple(sorted(merged.items()))


def figures(pods: Sequence[Sequence[EngineSample]], *, canary_failures: int = 0) -> Figures:
    """The signals of one side from each of its pods' scrapes over the window (oldest first)."""
    spans = [s for s in pods if len(s) >= 2 and s[-1].t > s[0].t]
    seconds = max((s[-1].t - s[0].t for s in spans), default=0.0)
    ttft, tpot = _merged(spans, lambda s: s.ttft), _merged(spans, lambda s: s.tpot)
    running = sum(sum(x.running for x in s) / len(s) for s in spans)
    tokens = sum(increase(s, lambda x: x.generation_tokens) / (s[-1].t - s[0].t) for s in spans)
    return Figures(
        replicas=len(spans),
        seconds=seconds,
        requests=ttft[-1][1] if ttft else 0.0,
        ttft_p90=quantile(ttft, QUANTILE),
        tpot_p90=quantile(tpot, QUANTILE),
        tokens_per_request=tokens / running if running > 0 else None,
        waiting=sum(sum(x.waiting for x in s) / len(s) for s in spans) / len(spans) if spans else 0.0,
        canary_failures=canary_failures,
        finished=sum(increase(s, lambda x: x.finished) for s in spans),
        errors=sum(increase(s, lambda x: x.errored) for s in spans),
    )


@dataclass(frozen=True, kw_only=True)
class Input:
    canary: Figures
    """The new revision's one replica."""
    baseline: Figures
    """The previous revision's replicas over the same window (or recorded before the change)."""
    thresholds: AnalysisThresholds


class Comparison(NamedTuple):
    """A check's answer: (reason, message, failed), and the two values it compared."""

    reason: RolloutSignal
    message: str
    failed: bool
    canary: float | None = None
    baseline: float | None = None


def _ok(reason: RolloutSignal) -> Comparison:
    return Comparison(reason, "", False)


def canary_failures(i: Input) -> Comparison:
    """Generation canaries that failed on the new replica: it does not work, whatever the traffic."""
    n, limit = i.canary.canary_failures, i.thresholds.canary_failures
    if n > limit:
        return Comparison(
            RolloutSignal.CANARY_FAILURES, f"{n} generation canaries failed (more than {limit})", True, n, 0
        )
    return _ok(RolloutSignal.CANARY_FAILURES)


#: Engine errors on the new replica below this count never decide, whatever the share (one KV load failure
#: is not a pattern).
MIN_ERRORS = 2


def errors(i: Input) -> Comparison:
    """Requests the engine ended with an error (a 500): before the traffic check, since a revision that errors
    on every request before its first token would otherwise only ever extend the window."""
    c, b = i.canary.error_rate, i.baseline.error_rate
    limit = i.thresholds.error_rate
    if i.canary.errors < MIN_ERRORS or c - b <= limit:
        return _ok(RolloutSignal.ERRORS)
    why = (
        f"{i.canary.errors:g} of {i.canary.finished:g} requests on the new replica ended in an engine error "
        f"({c:.1%}) against {b:.1%} on the previous replicas (limit +{limit:.0%})"
    )
    return Comparison(RolloutSignal.ERRORS, why, True, c, b)


def too_little_traffic(i: Input) -> Comparison:
    """Either side started fewer than minRequests per replica: the window is extended."""
    need = i.thresholds.min_requests
    canary, base = i.canary.requests, i.baseline.requests / max(1, i.baseline.replicas)
    if canary < need or base < need:
        why = f"{canary:g} requests on the new replica, {base:g} per previous replica (need {need} each)"
        return Comparison(RolloutSignal.TOO_LITTLE_TRAFFIC, why, True, canary, base)
    return _ok(RolloutSignal.TOO_LITTLE_TRAFFIC)


def _ratio_check(
    reason: RolloutSignal, label: str, canary: float | None, base: float | None, *, limit: float, floor: float
) -> Comparison:
    if canary is None or base is None or canary - base < floor or canary <= base * limit:
        return _ok(reason)
    ratio = canary / base if base > 0 else float("inf")
    why = f"{label} {canary:.3f} s on the new replica against {base:.3f} s ({ratio:.2f}x, limit {limit:g}x)"
    return Comparison(reason, why, True, canary, base)


def ttft(i: Input) -> Comparison:
    """TTFT p90: the new revision queues or prefills slower."""
    c, b = i.canary.ttft_p90, i.baseline.ttft_p90
    limit = i.thresholds.ttft_p90_ratio
    return _ratio_check(RolloutSignal.TTFT, "TTFT p90", c, b, limit=limit, floor=MIN_TTFT_DELTA_SECONDS)


def tpot(i: Input) -> Comparison:
    """TPOT p90: the new revision decodes slower per token."""
    c, b = i.canary.tpot_p90, i.baseline.tpot_p90
    limit = i.thresholds.tpot_p90_ratio
    return _ratio_check(RolloutSignal.TPOT, "TPOT p90", c, b, limit=limit, floor=MIN_TPOT_DELTA_SECONDS)


def tokens_per_request(i: Input) -> Comparison:
    """Output tokens/s per running request: the new revision serves each user slower."""
    c, b = i.canary.tokens_per_request, i.baseline.tokens_per_request
    limit = i.thresholds.tokens_per_request_ratio
    if c is None or b is None or b <= 0 or c >= b * limit:
        return _ok(RolloutSignal.TOKENS_PER_REQUEST)
    why = f"{c:.1f} output tokens/s per running request against {b:.1f} ({c / b:.2f}x, limit {limit:g}x)"
    return Comparison(RolloutSignal.TOKENS_PER_REQUEST, why, True, c, b)


def queue(i: Input) -> Comparison:
    """Waiting requests: the new revision holds fewer at once and queues the rest."""
    c, b = i.canary.waiting, i.baseline.waiting
    limit = i.thresholds.waiting_per_replica
    if c - b <= limit:
        return _ok(RolloutSignal.QUEUE)
    why = f"{c:.1f} requests waiting on the new replica against {b:.1f} per previous replica (limit +{limit:g})"
    return Comparison(RolloutSignal.QUEUE, why, True, c, b)


Check = Callable[[Input], Comparison]
#: In order: the first failing check decides.
CHECKS: tuple[Check, ...] = (canary_failures, errors, too_little_traffic, ttft, tpot, tokens_per_request, queue)


class Outcome(StrEnum):
    PASSED = "Passed"
    FAILED = "Failed"
    EXTEND = "Extend"


@dataclass(frozen=True, kw_only=True)
class AnalysisVerdict:
    outcome: Outcome
    signal: RolloutSignal | RollReason | VerdictReason | Literal[""] = ""
    """What decided ("" when nothing did: passed, or nothing to compare with)."""
    message: str = ""
    canary: float | None = None
    baseline: float | None = None


def judge(i: Input) -> AnalysisVerdict:
    """The chain's verdict: the first failing check decides; none failing passes."""
    for check in CHECKS:
        found = check(i)
        if found.failed:
            outcome = Outcome.EXTEND if found.reason is RolloutSignal.TOO_LITTLE_TRAFFIC else Outcome.FAILED
            return AnalysisVerdict(
                outcome=outcome,
                signal=found.reason,
                message=found.message,
                canary=found.canary,
                baseline=found.baseline,
            )
    return AnalysisVerdict(outcome=Outcome.PASSED, message="within every threshold")
