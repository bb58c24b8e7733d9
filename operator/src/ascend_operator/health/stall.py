"""Stall detection as a policy chain: the first policy that explains the engine's state decides.

A stall is requests running and no forward progress for a window. Progress is any of prompt tokens,
generation tokens or engine iterations advancing, or KV usage moving: a 300K/512K chunked prefill
allocates KV chunk by chunk before its first token (the seed's 512K run went 0.6% -> 83.7% -> 90.8% ->
97.5% KV), so a growing KV gauge is progress even while the token counters stand still. Not a stall:
an idle engine, a stale KV gauge with nothing running after aborted requests (vllm issue 29928), a slow
canary while counters advance. Pure: samples and the current time in, a finding out.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ascend_operator.api.health import StallSpec
from ascend_operator.health.samples import EngineSample, progress_counters

#: KV usage moving by less than this between scrapes is not progress (gauge rounding, block reuse).
KV_EPSILON = 1e-4


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


def _idle(samples: Sequence[EngineSample], now: float, cfg: StallSpec, canary_failures: int) -> StallFinding | None:
    last = samples[-1]
    if last.running <= 0:
        return StallFinding(
            stalled=False,
            reason="Idle",
            message="no request running" + (f" (KV gauge reads {last.kv_usage:.1%})" if last.kv_usage else ""),
        )
    return None


def _same_state(a: EngineSample, b: EngineSample) -> bool:
    return progress_counters(a) == progress_counters(b) and abs(a.kv_usage - b.kv_usage) < KV_EPSILON


def stuck_since(samples: Sequence[EngineSample]) -> float:
    """Time of the earliest sample from which nothing moved and requests kept running."""
    since = samples[-1].t
    for before, after in zip(reversed(samples[:-1]), reversed(samples[1:]), strict=False):
        if before.running <= 0 or not _same_state(before, after):
            break
        since = before.t
    return since


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
    return StallFinding(
        stalled=True,
        reason="Stalled",
        message=f"{last.running:.0f} request(s) running and no forward progress for {frozen_for:.0f}s{detail}",
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
