"""The vocabulary of disruption decisions: what each reason for a deletion (api/reasons.py `RollReason`, part of
the API) means to the decision, what the decision sees of each pod, and what it decides. Separate from the
rules so the health machine (which only names reasons) imports no policy."""

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

# part of the API (api/reasons.py), and the decision's vocabulary: re-exported for the decision's users
from ascend_operator.api.reasons import DrainResult as DrainResult
from ascend_operator.api.reasons import RollReason as RollReason


@dataclass(frozen=True, kw_only=True)
class Kind:
    """Which of the decision's rules apply to one kind of deletion (the refusal chain, disruption/decide.py
    `REFUSALS`, reads these and never a reason by name)."""

    why: str
    health: bool = False
    """Found by the health loop: held during the startup grace and spaced by spec.health.rolls (maxPerHour,
    cooldown) over the limit's own record, status.healthRolls. What the user asked for is not rate limited."""
    serving: bool = False
    """The pod still serves: never the last Ready replica (a slow engine serves, an absent one does not)."""
    drains: bool = False
    """Planned: a serving pod is drained first (a stalled or crashed engine serves nobody, so it is not)."""
    removes: bool = False
    """Removes a replica rather than recreating it: a group's leader goes by shrinking the LeaderWorkerSet
    (deleting the leader would make LWS recreate the group)."""
    hung: bool = False
    """Nothing in the pod can finish: it is deleted with a grace of `HUNG_GRACE_SECONDS` instead of its own
    (its engine's `--shutdown-timeout` drain would only hold the NPUs until the kubelet's SIGKILL)."""
    force: bool = False
    """No kubelet will ever confirm the deletion (the pod's node is lost): the pod is deleted with a grace of 0
    (the API server removes it at once), and one already terminating is deleted again that way, instead of
    keeping its replica slot until the node comes back."""


#: One row per kind of deletion: adding a kind is a `RollReason` member and its row here, nothing else
#: (tests/disruption/test_one_place.py).
KINDS: Mapping[RollReason, Kind] = MappingProxyType(
    {
        RollReason.STALLED: Kind(
            why="no forward progress, or a group lost a worker (health/stall.py, health/judge.py)",
            health=True,
            hung=True,
        ),
        RollReason.DRIFT: Kind(
            why="engine steps slower than the pod's baseline (health/drift.py)", health=True, serving=True, drains=True
        ),
        RollReason.MAX_AGE: Kind(
            why="older than spec.health.recycle allows (health/recycle.py)", health=True, serving=True, drains=True
        ),
        RollReason.SPEC_CHANGED: Kind(why="the pod runs an earlier spec", drains=True),
        RollReason.SCALE_DOWN: Kind(why="more replicas than spec.replicas", drains=True, removes=True),
        RollReason.DUPLICATE: Kind(why="a second pod for one replica index"),
        RollReason.TOPOLOGY_CHANGED: Kind(
            why="spec.parallelism.nodes went from 1 to more or back: a plain pod or a whole group makes way for "
            "the other shape, one budgeted decision at a time",
            drains=True,
            removes=True,
        ),
        RollReason.NPU_FAULT: Kind(
            why="the Ascend device plugin reports a chip the pod holds faulty at a level MindCluster acts on "
            "(health/chips.py): the plugin never evicts, and the chip cannot be reset while the pod holds it",
            hung=True,
        ),
        RollReason.NPU_PRE_SEPARATE: Kind(
            why="the device plugin pre-separates a chip the pod holds (PreSeparateNPU): the chip still works for "
            "the pod using it and goes once free, so the pod is drained like a planned roll, never as the last "
            "serving replica (health/chips.py)",
            serving=True,
            drains=True,
        ),
        RollReason.NODE_UNHEALTHY: Kind(
            why="NodeD reports the pod's node UnHealthy, or most of its chips are faulty: one cause for the node, "
            "not a roll per chip (health/chips.py)",
            hung=True,
        ),
        RollReason.GROUP_RECREATED: Kind(
            why="observed, not decided: LeaderWorkerSet recreated a group on its own (a member restarted or was "
            "evicted, or its rolling update replaced the group)"
        ),
        RollReason.NODE_LOST: Kind(
            why="the pod's node stopped reporting (Ready False or Unknown, the unreachable taint, or its Lease "
            "expired) for spec.health.nodeLostSeconds and its engine does not answer (health/node_loss.py): "
            "forced out, since no kubelet will confirm the deletion, its successor kept off the node",
            force=True,
        ),
        RollReason.ROLLED_BACK: Kind(
            why="the new revision's first replica was worse than the previous revision's under the same traffic "
            "(spec.rollout.analysis): it goes back to the previous revision, drained",
            drains=True,
        ),
    }
)

#: The rules' views of `KINDS` (derived: never listed by hand).
HEALTH_REASONS = frozenset(reason for reason, kind in KINDS.items() if kind.health)
SERVING_REASONS = frozenset(reason for reason, kind in KINDS.items() if kind.serving)
PLANNED_REASONS = frozenset(reason for reason, kind in KINDS.items() if kind.drains)
REMOVAL_REASONS = frozenset(reason for reason, kind in KINDS.items() if kind.removes)
HUNG_REASONS = frozenset(reason for reason, kind in KINDS.items() if kind.hung)
FORCE_REASONS = frozenset(reason for reason, kind in KINDS.items() if kind.force)
#: The deletion grace of a hung pod: its SIGTERM, then the kubelet's SIGKILL this much later, so the NPUs
#: are free in seconds rather than after the pod's terminationGracePeriodSeconds (60 s by default).
HUNG_GRACE_SECONDS = 5

#: Every rule that may refuse a candidate, in the order of the chain (disruption/decide.py `REFUSALS`); the
#: operator's metrics create a series for each at 0.
POD_GONE = "PodGone"
ROLL_RULES = (POD_GONE, "InStartupGrace", "RateLimited", "Cooldown", "LastReadyReplica", "AnotherReplicaOut")
#: Holds that are not refusals: the pod is already draining, or another decision was taken this pass.
DRAINING = "Draining"
ONE_AT_A_TIME = "OneDecisionPerPass"


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
    arrived: tuple[float, float] | None = None
    """(start, end) epoch seconds of the last interval between two scrapes in which requests reached the
    engine (its finished count plus its running + waiting grew), None when none was seen. One that began
    after the drain did means something still routes to the pod (endpoints not yet propagated, a client
    holding an old list): the drain waits until it has been quiet for the settle time."""
    unanswered_since: float | None = None
    """Epoch seconds of the first of the unanswered scrapes up to the last one (an engine that died while
    draining), None when the last scrape was answered. One unanswered scrape is not a dead engine: a busy
    engine on a loaded host can miss a scrape's timeout while it still streams (seen on the real engine)."""

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
