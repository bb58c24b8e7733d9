"""Whether a pod may be recreated now: the roll policy. Rolls never storm.

Rules, in order (the first that refuses decides, and the refusal is reported, not acted on):
1. never before the pod's startup grace ends (~292 GB of weights load for minutes). The grace ends after
   `startupGraceSeconds`, or earlier once the engine has proven it finished loading by passing the canary
   and the config check (a Ready verdict): from then on it is in service and judged like any other;
2. at most `maxPerHour` rolls per service in any hour;
3. not within `cooldownSeconds` of the service's previous roll;
4. one replica at a time for planned rolls (drift, age): none while another replica is not Ready or is
   terminating. A stalled engine serves nobody, so its roll does not wait for other replicas: two stalled
   replicas do not hold each other out (each is not Ready because of our own gate), and a stalled pod never
   waits behind a healthy replica's planned roll; rules 2 and 3 still space its rolls;
5. never the last Ready replica for drift or age (a slow engine serves; an absent one does not);
   a stalled or crashed engine serves nobody, so rule 5 does not hold it.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ascend_operator.api.health import HealthSpec

HOUR = 3600.0


class RollReason(StrEnum):
    """Why a pod is rolled (recorded in status.lastRoll, events and operator metrics)."""

    STALLED = "Stalled"
    DRIFT = "ThroughputDrift"
    MAX_AGE = "MaxAge"


#: Reasons for which the pod still serves, so the last Ready replica is kept.
SERVING_REASONS = frozenset({RollReason.DRIFT, RollReason.MAX_AGE})


@dataclass(frozen=True, kw_only=True)
class PodState:
    """A replica as the roll policy sees it."""

    name: str
    ready: bool
    terminating: bool
    started_at: float | None
    """Epoch seconds the pod started, None when not started."""
    served: bool = False
    """The engine has been Ready at least once (its load is over)."""


@dataclass(frozen=True, kw_only=True)
class RollDecision:
    """Allowed, or the rule that refused, with a message for the condition."""

    allowed: bool
    rule: str
    message: str


#: Every rule `decide_roll` may refuse with (the operator's metrics create a series for each at 0).
ROLL_RULES = ("PodGone", "InStartupGrace", "RateLimited", "Cooldown", "AnotherReplicaOut", "LastReadyReplica")


def decide_roll(
    *, pod: str, reason: RollReason, pods: Sequence[PodState], history: Sequence[float], now: float, cfg: HealthSpec
) -> RollDecision:
    """Apply the rules in order."""
    target = next((p for p in pods if p.name == pod), None)
    if target is None or target.terminating:
        return RollDecision(allowed=False, rule="PodGone", message=f"pod {pod} is gone or terminating")
    loading = target.started_at is None or now - target.started_at < cfg.startup_grace_seconds
    if loading and not target.served:
        return RollDecision(
            allowed=False,
            rule="InStartupGrace",
            message=f"pod {pod} is inside its {cfg.startup_grace_seconds:.0f}s startup grace and was never Ready",
        )
    recent = [t for t in history if now - t < HOUR]
    if len(recent) >= cfg.rolls.max_per_hour:
        return RollDecision(
            allowed=False,
            rule="RateLimited",
            message=f"{len(recent)} roll(s) in the last hour (max {cfg.rolls.max_per_hour})",
        )
    if history and now - max(history) < cfg.rolls.cooldown_seconds:
        return RollDecision(
            allowed=False,
            rule="Cooldown",
            message=f"last roll {now - max(history):.0f}s ago (cooldown {cfg.rolls.cooldown_seconds:.0f}s)",
        )
    others = [p for p in pods if p.name != pod]
    out = [p.name for p in others if p.terminating or not p.ready]
    if out and reason in SERVING_REASONS:
        return RollDecision(allowed=False, rule="AnotherReplicaOut", message=f"waiting for {', '.join(out)}")
    if reason in SERVING_REASONS and not any(p.ready for p in others):
        return RollDecision(
            allowed=False,
            rule="LastReadyReplica",
            message=f"pod {pod} is the last Ready replica; {reason} does not roll it",
        )
    return RollDecision(allowed=True, rule="Allowed", message=f"roll {pod}: {reason}")
