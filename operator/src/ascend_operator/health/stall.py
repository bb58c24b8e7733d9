"""Stall detection as a policy chain: the first policy that explains the engine's state decides.

A stall is something asked of the engine and no forward progress for a window. Asked: requests running or
waiting at some scrape of the frozen span, or a canary that got no tokens while nothing advanced (an engine
that hangs while idle is only ever asked by the canary: without this it would be unready forever and never
rolled). Progress is the one definition of `ascend_operator.health.progress`: a counter advancing or the KV
gauge moving, because a 300K/512K chunked prefill moves only the KV gauge until it completes (the seed's
512K run went 0.6% -> 83.7% -> 90.8% -> 97.5% KV). KV >= 97.5% is evidence in the message, not a trigger.
Not a stall: an idle engine, a stale KV gauge with nothing asked after aborted requests (vllm issue
29928), a canary queued behind busy slots while the engine advances. Pure: samples and time in, a finding out.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ascend_operator.api.health import StallSpec
from ascend_operator.health.progress import restarted
from ascend_operator.health.samples import EngineSample, advanced


@dataclass(frozen=True, kw_only=True)
class StallFinding:
    """The verdict with the policy that gave it and its evidence."""

    stalled: bool
    reason: str
    message: str
    evidence: dict[str, float] = field(default_factory=dict)


Policy = Callable[[Sequence[EngineSample], float, StallSpec, int], StallFinding | None]


def _no_data(samples: Sequence[EngineSample], now: float, cfg: StallSpec, canary_failures: int) -> StallFinding | None:
    if len(samples) < 2:
        return StallFinding(stalled=False, reason="InsufficientData", message="fewer than two scrapes")
    return None


def _frozen(samples: Sequence[EngineSample]) -> Sequence[EngineSample]:
    """The trailing samples between which nothing advanced (at least the last one); an engine restart (a
    counter going backwards) also ends the span: the new process is judged from its own first sample."""
    start = len(samples) - 1
    while start > 0:
        before, after = samples[start - 1], samples[start]
        if advanced(before, after) or restarted(before.progress, after.progress):
            break
        start -= 1
    return samples[start:]


def stuck_since(samples: Sequence[EngineSample]) -> float:
    """Time of the earliest sample from which the engine made no forward progress."""
    return _frozen(samples)[0].t


def _idle(samples: Sequence[EngineSample], now: float, cfg: StallSpec, canary_failures: int) -> StallFinding | None:
    # Asked now, not at some point of the span: requests that finished or were aborted (running back to 0
    # with a stale KV gauge) ask nothing more of the engine.
    last = samples[-1]
    if last.running <= 0 and last.waiting <= 0 and canary_failures <= 0:
        return StallFinding(
            stalled=False,
            reason="Idle",
            message="nothing asked of the engine" + (f" (KV gauge reads {last.kv_usage:.1%})" if last.kv_usage else ""),
        )
    return None


def _progressing(
    samples: Sequence[EngineSample], now: float, cfg: StallSpec, canary_failures: int
) -> StallFinding | None:
    frozen_for = now - stuck_since(samples)
    if frozen_for < cfg.window_seconds:
        return StallFinding(
            stalled=False,
            reason="Progressing",
            message=f"progress within the last {cfg.window_seconds:.0f}s",
            evidence={"frozenSeconds": round(frozen_for, 1)},
        )
    return None


def _stalled(samples: Sequence[EngineSample], now: float, cfg: StallSpec, canary_failures: int) -> StallFinding:
    last = samples[-1]
    frozen_for = now - stuck_since(samples)
    strong = last.kv_usage >= cfg.kv_evidence_threshold
    detail = (
        f"; KV at {last.kv_usage:.1%} (>= {cfg.kv_evidence_threshold:.1%}, the seed's 512K stall)" if strong else ""
    )
    asked = f"{last.running:.0f} request(s) running, {last.waiting:.0f} waiting"
    if last.running <= 0 and last.waiting <= 0:
        asked = f"{canary_failures} canary request(s) got no tokens"
    return StallFinding(
        stalled=True,
        reason="Stalled",
        message=f"{asked} and no forward progress for {frozen_for:.0f}s{detail}",
        evidence={
            "frozenSeconds": round(frozen_for, 1),
            "running": last.running,
            "waiting": last.waiting,
            "kvUsage": round(last.kv_usage, 4),
            "canaryFailures": float(canary_failures),
        },
    )


POLICIES: tuple[Policy, ...] = (_no_data, _idle, _progressing)


def detect_stall(
    samples: Sequence[EngineSample], *, now: float, cfg: StallSpec, canary_failures: int = 0
) -> StallFinding:
    """Run the chain; a stall is what remains when no policy explains the state."""
    ordered = sorted(samples, key=lambda s: s.t)
    for policy in POLICIES:
        finding = policy(ordered, now, cfg, canary_failures)
        if finding is not None:
            return finding
    return _stalled(ordered, now, cfg, canary_failures)
