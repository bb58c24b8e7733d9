"""The disruption decision: every candidate and every pod in, one action (or none) out. Pure.

Order of business in one pass:
1. a drain in progress ends first: its pod is deleted once its running + waiting requests reach 0 at a
   scrape taken at least `settle_seconds` after the drain started (so a request routed before the Service
   dropped the pod is counted) and after the last requests that still reached it since (something that
   still routes there, an endpoint list not yet updated, would otherwise lose its next request), when
   `drainSeconds` passes, or once the engine has not answered a scrape for a stall window;
2. then the candidates, pods that serve nobody first (a duplicate, a stalled, crashed or loading pod),
   then planned ones in replica order. For each, the chain `REFUSALS` in order (each rule a function of
   `RuleInput` returning (reason, message, refused)); the first that refuses holds it:
   - PodGone: the pod (by uid) is gone or already terminating (a forced kind, NodeLost, still deletes a
     terminating pod: on a lost node nothing else ever will);
   - InStartupGrace (health reasons): never judge a loading engine (~292 GB of weights load for minutes);
     the grace ends early once the pod has been Ready;
   - RateLimited, Cooldown (health reasons): spec.health.rolls.maxPerHour and cooldownSeconds over the
     times of the health rolls (the limit's own record, status.healthRolls);
   - LastReadyReplica (drift, age): a slow engine serves, an absent one does not;
   - AnotherReplicaOut: the budget. Deleting a serving pod must leave at most
     spec.rollout.maxUnavailable of the desired replicas without a serving pod (missing, loading,
     draining, terminating or failing pods all count as out). A pod that serves nobody does not consume
     the budget (a PodDisruptionBudget with unhealthyPodEvictionPolicy AlwaysAllow), so two stalled
     replicas never hold each other out and a stale, crashing pod is replaced at once.
   A candidate on a pod that drains waits for the drain (`Draining`), unless it is a stall: a stalled
   engine finishes nothing, so it is deleted at once.
   The first candidate every rule allows is the decision: a serving pod with a planned reason drains, any
   other is deleted without a drain. Every later candidate is held with `OneDecisionPerPass`.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ascend_operator.api.health import HealthSpec
from ascend_operator.disruption.model import (
    DRAINING,
    FORCE_REASONS,
    HEALTH_REASONS,
    ONE_AT_A_TIME,
    PLANNED_REASONS,
    POD_GONE,
    SERVING_REASONS,
    Candidate,
    Delete,
    Drain,
    DrainResult,
    Held,
    PodState,
)

HOUR = 3600.0


@dataclass(frozen=True, kw_only=True)
class DisruptionConfig:
    """The knobs the decision reads."""

    replicas: int
    """spec.replicas: the budget is counted against the desired replicas, not the pods that exist."""
    max_unavailable: int = 1
    drain_seconds: float = 1800.0
    settle_seconds: float = 5.0
    """Least time a drain lasts before "no requests" counts (endpoint removal takes a moment to reach
    every kube-proxy and endpoint picker), and the quiet it needs after requests that still arrived while
    it drained; the scrape interval."""
    health: HealthSpec


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What to do this pass, and why everything else waits."""

    action: Delete | Drain | None
    held: tuple[Held, ...] = ()


def _drain_end(pod: PodState, *, now: float, cfg: DisruptionConfig) -> DrainResult | None:
    since = pod.draining_since
    assert since is not None
    if pod.unanswered_since is not None and now - pod.unanswered_since >= cfg.health.stall.window_seconds:
        return DrainResult.NOT_DRAINED
    arrived = pod.arrived  # requests that reached it after the gate fell: quiet only from their scrape on
    quiet_since = arrived[1] if arrived is not None and arrived[0] >= since else since
    if pod.in_flight == 0 and pod.in_flight_at is not None and pod.in_flight_at - quiet_since >= cfg.settle_seconds:
        return DrainResult.COMPLETED
    if now - since >= cfg.drain_seconds:
        return DrainResult.TIMED_OUT
    return None


def _finish_drain(pods: Sequence[PodState], *, now: float, cfg: DisruptionConfig) -> Delete | None:
    for pod in pods:
        if pod.draining_since is None or pod.terminating or pod.drain_reason is None:
            continue
        result = _drain_end(pod, now=now, cfg=cfg)
        if result is not None:
            waited = now - pod.draining_since
            message = f"{pod.drain_message} (drained {waited:.0f}s: {result.value})".lstrip()
            return Delete(pod=pod.name, uid=pod.uid, reason=pod.drain_reason, message=message, drain=result)
    return None


@dataclass(frozen=True, kw_only=True)
class RuleInput:
    """What a refusal rule sees of one candidate: its pod (None when gone), every pod, the health roll times."""

    cand: Candidate
    target: PodState | None
    pods: Sequence[PodState]
    history: Sequence[float]
    """Epoch times of the health rolls in the limit's own record (see `decide`)."""
    now: float
    cfg: DisruptionConfig


#: A rule's answer: (reason, message, refused); the reason names the rule, the message says why it held.
Verdict = tuple[str, str, bool]
Rule = Callable[[RuleInput], Verdict]
ALLOW: Verdict = ("", "", False)


def pod_gone(i: RuleInput) -> Verdict:
    """The pod (by uid) is gone or already terminating: nothing to delete. A forced kind (a lost node) still
    deletes a terminating pod: no kubelet will ever finish its deletion."""
    if i.target is None or (i.target.terminating and i.cand.reason not in FORCE_REASONS):
        return POD_GONE, f"pod {i.cand.pod} is gone or terminating", True
    return ALLOW


def in_startup_grace(i: RuleInput) -> Verdict:
    """Health reasons: never judge a loading engine; the grace ends early once the pod has been Ready."""
    health, target = i.cfg.health, i.target
    if i.cand.reason not in HEALTH_REASONS or target is None:
        return ALLOW
    if health.in_startup_grace(target.started_at, served=target.served, now=i.now):
        message = (
            f"pod {i.cand.pod} is inside its {health.startup_grace_seconds:.0f}s startup grace and was never Ready"
        )
        return "InStartupGrace", message, True
    return ALLOW


def rate_limited(i: RuleInput) -> Verdict:
    """Health reasons: at most spec.health.rolls.maxPerHour health rolls in the last hour."""
    if i.cand.reason not in HEALTH_REASONS:
        return ALLOW
    limit = i.cfg.health.rolls.max_per_hour
    recent = [t for t in i.history if i.now - t < HOUR]
    if len(recent) >= limit:
        return "RateLimited", f"{len(recent)} roll(s) in the last hour (max {limit})", True
    return ALLOW


def cooldown(i: RuleInput) -> Verdict:
    """Health reasons: spec.health.rolls.cooldownSeconds since the last health roll."""
    if i.cand.reason not in HEALTH_REASONS or not i.history:
        return ALLOW
    since, wait = i.now - max(i.history), i.cfg.health.rolls.cooldown_seconds
    if since < wait:
        return "Cooldown", f"last roll {since:.0f}s ago (cooldown {wait:.0f}s)", True
    return ALLOW


def last_ready_replica(i: RuleInput) -> Verdict:
    """Drift and age: a slow engine serves, an absent one does not."""
    others = [p for p in i.pods if i.target is None or p.uid != i.target.uid]
    if i.cand.reason in SERVING_REASONS and not any(p.healthy for p in others):
        return "LastReadyReplica", f"pod {i.cand.pod} is the last Ready replica; {i.cand.reason} does not roll it", True
    return ALLOW


def another_replica_out(i: RuleInput) -> Verdict:
    """The budget: deleting a serving pod leaves at most spec.rollout.maxUnavailable replicas not serving."""
    target, cfg = i.target, i.cfg
    if target is None or not target.healthy:
        return ALLOW  # a pod that serves nobody costs nothing
    others = [p for p in i.pods if p.uid != target.uid]
    out_after = max(0, cfg.replicas - sum(1 for p in others if p.healthy))
    if out_after <= cfg.max_unavailable:
        return ALLOW
    out = sorted(p.name for p in others if not p.healthy)
    detail = f": {', '.join(out)}" if out else ""
    message = (
        f"taking {i.cand.pod} out would leave {out_after} of {cfg.replicas} replica(s) not serving "
        f"(maxUnavailable {cfg.max_unavailable}); waiting for{detail or ' replicas to become Ready'}"
    )
    return "AnotherReplicaOut", message, True


#: The refusals, in order: the first that refuses holds the candidate (cert-manager's policy chains).
REFUSALS: tuple[Rule, ...] = (
    pod_gone,
    in_startup_grace,
    rate_limited,
    cooldown,
    last_ready_replica,
    another_replica_out,
)


def first_refusal(i: RuleInput, chain: Sequence[Rule] = REFUSALS) -> tuple[str, str] | None:
    """The first rule of `chain` that refuses, as (rule, message); None when every rule allows."""
    for rule in chain:
        reason, message, refused = rule(i)
        if refused:
            return reason, message
    return None


def _order(cand: Candidate, target: PodState | None) -> tuple[int, str]:
    """Pods that serve nobody first: deleting them costs nothing and frees their NPUs."""
    return (0 if target is None or not target.healthy else 1, cand.pod)


def decide(
    *,
    candidates: Sequence[Candidate],
    pods: Sequence[PodState],
    history: Sequence[float],
    now: float,
    cfg: DisruptionConfig,
) -> Decision:
    """One decision for this pass (see the module docstring for the rules).

    `history` holds the epoch times of the health rolls in the limit's own record (status.healthRolls,
    which spec changes and scale-downs never fill).
    """
    by_uid = {p.uid: p for p in pods}
    finished = _finish_drain(pods, now=now, cfg=cfg)
    action: Delete | Drain | None = finished
    held: list[Held] = []
    seen: set[tuple[str, str]] = set()
    for cand in sorted(candidates, key=lambda c: _order(c, by_uid.get(c.uid))):
        if (cand.uid, cand.reason) in seen:
            continue
        seen.add((cand.uid, cand.reason))
        target = by_uid.get(cand.uid)
        if target is not None and target.draining_since is not None and not target.terminating:
            if cand.reason not in PLANNED_REASONS and action is None:  # stalled mid-drain: nothing to wait for
                action = Delete(
                    pod=cand.pod, uid=cand.uid, reason=cand.reason, message=cand.message, drain=DrainResult.NOT_DRAINED
                )
            elif action is None or action.uid != cand.uid:
                held.append(Held(candidate=cand, rule=DRAINING, message=f"pod {cand.pod} is draining"))
            continue
        refusal = first_refusal(RuleInput(cand=cand, target=target, pods=pods, history=history, now=now, cfg=cfg))
        if refusal is not None:
            held.append(Held(candidate=cand, rule=refusal[0], message=refusal[1]))
        elif action is not None:
            held.append(Held(candidate=cand, rule=ONE_AT_A_TIME, message="one disruption decision per pass"))
        elif target is not None and target.healthy and cand.reason in PLANNED_REASONS and cfg.drain_seconds > 0:
            action = Drain(pod=cand.pod, uid=cand.uid, reason=cand.reason, message=cand.message)
        else:
            action = Delete(
                pod=cand.pod, uid=cand.uid, reason=cand.reason, message=cand.message, drain=DrainResult.NOT_DRAINED
            )
    return Decision(action=action, held=tuple(held))
