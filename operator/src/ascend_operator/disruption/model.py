"""The vocabulary of disruption decisions: why a pod goes, what the decision sees of each pod, and what it
decides. Separate from the rules so the health machine (which only names reasons) imports no policy."""

from dataclasses import dataclass
from enum import StrEnum


class RollReason(StrEnum):
    """Why a pod is deleted (status.rolls, events and the `ascend_operator_rolls_total{reason}` series)."""

    STALLED = "Stalled"
    DRIFT = "ThroughputDrift"
    MAX_AGE = "MaxAge"
    SPEC_CHANGED = "SpecChanged"
    SCALE_DOWN = "ScaleDown"
    DUPLICATE = "Duplicate"
    TOPOLOGY_CHANGED = "TopologyChanged"
    """spec.parallelism.nodes went from 1 to more or back: a plain pod or a whole group makes way for the
    other shape, one budgeted decision at a time."""
    GROUP_RECREATED = "GroupRecreated"
    """Observed, not decided: LeaderWorkerSet recreated a group on its own (a member restarted or was
    evicted, or its rolling update replaced the group)."""


#: Reasons found by the health loop: spaced by spec.health.rolls (maxPerHour, cooldown) and held during
#: the startup grace. Spec changes and scale-downs are what the user asked for and are not rate limited.
HEALTH_REASONS = frozenset({RollReason.STALLED, RollReason.DRIFT, RollReason.MAX_AGE})
#: Reasons for which the pod still serves: never the last Ready replica.
SERVING_REASONS = frozenset({RollReason.DRIFT, RollReason.MAX_AGE})
#: Planned deletions of a serving pod are drained first (a stalled or crashed engine serves nobody).
PLANNED_REASONS = frozenset(
    {RollReason.DRIFT, RollReason.MAX_AGE, RollReason.SPEC_CHANGED, RollReason.SCALE_DOWN, RollReason.TOPOLOGY_CHANGED}
)
#: Reasons that remove a replica rather than recreate it: a group's leader with one of these is removed by
#: shrinking the LeaderWorkerSet (deleting the leader would make LWS recreate the group).
REMOVAL_REASONS = frozenset({RollReason.SCALE_DOWN, RollReason.TOPOLOGY_CHANGED})

#: Every rule that may refuse a candidate, in the order of the chain (disruption/decide.py `REFUSALS`); the
#: operator's metrics create a series for each at 0.
ROLL_RULES = ("PodGone", "InStartupGrace", "RateLimited", "Cooldown", "LastReadyReplica", "AnotherReplicaOut")
#: Holds that are not refusals: the pod is already draining, or another decision was taken this pass.
DRAINING = "Draining"
ONE_AT_A_TIME = "OneDecisionPerPass"


class DrainResult(StrEnum):
    """How the pod left (status.rolls[].drain)."""

    COMPLETED = "Completed"
    """Its running and waiting requests reached 0 after the gate went False."""
    TIMED_OUT = "TimedOut"
    """spec.rollout.drainSeconds passed with requests still in flight."""
    NOT_DRAINED = "NotDrained"
    """It served nobody (not Ready: stalled, crashed, loading) or stopped answering while draining."""


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A pod one of the loops wants gone."""

    pod: str
    uid: str
    reason: RollReason
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class PodState:
    """An engine pod (a single-node pod or a group's leader) as the decision sees it."""

    name: str
    uid: str
    ready: bool
    terminating: bool = False
    started_at: float | None = None
    """Epoch seconds the pod started, None when not started."""
    served: bool = False
    """The engine has been Ready at least once (its load is over)."""
    draining_since: float | None = None
    """Epoch seconds the drain started (the pod's drain annotation), None when not draining."""
    drain_reason: RollReason | None = None
    """Why it drains (from the same annotation), so the deletion that ends the drain keeps the reason."""
    drain_message: str = ""
    in_flight: int | None = None
    """vllm:num_requests_running + vllm:num_requests_waiting at the last scrape; None when unknown."""
    in_flight_at: float | None = None
    """Epoch seconds of that scrape: only a scrape taken after the drain settled can complete it."""
    answering: bool = True
    """False when the last scrape got no answer (an engine that died while draining)."""

    @property
    def healthy(self) -> bool:
        """Serving traffic: what the budget protects."""
        return self.ready and not self.terminating and self.draining_since is None


@dataclass(frozen=True, kw_only=True)
class Delete:
    """Delete the pod (uid precondition), after recording the roll."""

    pod: str
    uid: str
    reason: RollReason
    message: str
    drain: DrainResult


@dataclass(frozen=True, kw_only=True)
class Drain:
    """Take the pod out of the Service (readiness gate False, reason Draining) and wait for its requests."""

    pod: str
    uid: str
    reason: RollReason
    message: str


@dataclass(frozen=True, kw_only=True)
class Held:
    """A candidate that waits, and the rule that holds it."""

    candidate: Candidate
    rule: str
    message: str

    @property
    def refused(self) -> bool:
        """A rule said no (as opposed to waiting for a drain or for this pass's one decision)."""
        return self.rule in ROLL_RULES
