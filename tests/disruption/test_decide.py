"""The disruption decision, table-driven with an injected clock: one budget for every deletion, health
rolls spaced by the rate limit and cooldown, drains before planned deletions of serving pods."""

from dataclasses import replace

import pytest

from ascend_operator.api.health import HealthSpec, RollSpec
from ascend_operator.disruption import (
    Candidate,
    Decision,
    Delete,
    DisruptionConfig,
    Drain,
    DrainResult,
    Held,
    PodState,
    RollReason,
    decide,
)

NOW = 100_000.0
OLD = NOW - 7200
HEALTH = HealthSpec(startup_grace_seconds=1800, rolls=RollSpec(max_per_hour=3, cooldown_seconds=600))
R = RollReason


def cfg(replicas: int = 2, *, max_unavailable: int = 1, drain_seconds: float = 1800) -> DisruptionConfig:
    return DisruptionConfig(
        replicas=replicas,
        health=HEALTH,
        max_unavailable=max_unavailable,
        drain_seconds=drain_seconds,
        settle_seconds=5,
    )


def ready(name: str, **kw: object) -> PodState:
    return PodState(name=name, uid=f"u-{name}", ready=True, started_at=OLD, served=True, in_flight=2, **kw)  # type: ignore[arg-type]


def down(name: str, **kw: object) -> PodState:
    return PodState(name=name, uid=f"u-{name}", ready=False, started_at=OLD, served=True, **kw)  # type: ignore[arg-type]


def cand(name: str, reason: RollReason) -> Candidate:
    return Candidate(pod=name, uid=f"u-{name}", reason=reason, message=f"{reason} {name}")


def draining(name: str, since: float, in_flight: int | None, reason: RollReason = R.DRIFT, **kw: object) -> PodState:
    return replace(
        ready(name, **kw),
        ready=False,
        draining_since=since,
        drain_reason=reason,
        drain_message="m",
        in_flight=in_flight,
        in_flight_at=NOW,
    )


def delete(name: str, reason: RollReason, drain: DrainResult = DrainResult.NOT_DRAINED) -> Delete:
    return Delete(pod=name, uid=f"u-{name}", reason=reason, message=f"{reason} {name}", drain=drain)


def drain(name: str, reason: RollReason) -> Drain:
    return Drain(pod=name, uid=f"u-{name}", reason=reason, message=f"{reason} {name}")


def run(
    cands: list[Candidate], pods: list[PodState], history: tuple[float, ...] = (), *, replicas: int = 2
) -> Decision:
    return decide(candidates=cands, pods=pods, history=history, now=NOW, cfg=cfg(replicas))


def rules(decision: Decision) -> dict[str, str]:
    return {h.candidate.pod: h.rule for h in decision.held}


TWO = [ready("a-0"), ready("a-1")]

# (case, candidates, pods, history, replicas, expected action, expected {pod: holding rule})
CASES = [
    (
        "spec change on a serving pod drains it",
        [cand("a-0", R.SPEC_CHANGED)],
        TWO,
        [],
        2,
        drain("a-0", R.SPEC_CHANGED),
        {},
    ),
    (
        "a spec change takes one serving pod at a time",
        [cand("a-0", R.SPEC_CHANGED), cand("a-1", R.SPEC_CHANGED)],
        TWO,
        [],
        2,
        drain("a-0", R.SPEC_CHANGED),
        {"a-1": "OneDecisionPerPass"},
    ),
    (
        "a stale pod that is not Ready is replaced without draining and without budget",
        [cand("a-1", R.SPEC_CHANGED)],
        [ready("a-0"), down("a-1")],
        [],
        2,
        delete("a-1", R.SPEC_CHANGED),
        {},
    ),
    (
        "while one replica is stalled a spec change waits: never two replicas out",
        [cand("a-0", R.SPEC_CHANGED), cand("a-1", R.SPEC_CHANGED)],
        [ready("a-0"), ready("a-1"), down("a-2")],
        [],
        3,
        None,
        {"a-0": "AnotherReplicaOut", "a-1": "AnotherReplicaOut"},
    ),
    (
        "the stalled replica goes first; the spec change of a serving one waits for the next pass",
        [cand("a-0", R.SPEC_CHANGED), cand("a-2", R.STALLED)],
        [ready("a-0"), ready("a-1"), down("a-2")],
        [],
        3,
        delete("a-2", R.STALLED),
        {"a-0": "AnotherReplicaOut"},
    ),
    (
        "a missing replica (created, still loading) counts as out",
        [cand("a-0", R.SPEC_CHANGED)],
        [ready("a-0"), ready("a-1")],
        [],
        3,
        None,
        {"a-0": "AnotherReplicaOut"},
    ),
    (
        "maxUnavailable 2 lets a second serving pod out",
        [cand("a-0", R.SPEC_CHANGED)],
        [ready("a-0"), ready("a-1"), draining("a-2", NOW - 10, 3, R.SPEC_CHANGED)],
        [],
        3,
        "max2",
        {},
    ),
    (
        "a single replica's spec change drains the only pod (the budget allows one out)",
        [cand("a-0", R.SPEC_CHANGED)],
        [ready("a-0")],
        [],
        1,
        drain("a-0", R.SPEC_CHANGED),
        {},
    ),
    (
        "scale-down drains the pod it removes",
        [cand("a-1", R.SCALE_DOWN)],
        TWO,
        [],
        1,
        drain("a-1", R.SCALE_DOWN),
        {},
    ),
    (
        "a duplicate is deleted at once",
        [cand("a-1", R.DUPLICATE)],
        [ready("a-0"), down("a-1")],
        [],
        1,
        delete("a-1", R.DUPLICATE),
        {},
    ),
    ("drift drains a serving pod", [cand("a-0", R.DRIFT)], TWO, [], 2, drain("a-0", R.DRIFT), {}),
    (
        "never drift-roll the last Ready replica",
        [cand("a-0", R.DRIFT)],
        [ready("a-0"), down("a-1")],
        [],
        2,
        None,
        {"a-0": "LastReadyReplica"},
    ),
    (
        "a stall rolls even the only replica",
        [cand("a-0", R.STALLED)],
        [down("a-0")],
        [],
        1,
        delete("a-0", R.STALLED),
        {},
    ),
    (
        "two stalled replicas do not hold each other out",
        [cand("a-0", R.STALLED)],
        [down("a-0"), down("a-1")],
        [],
        2,
        delete("a-0", R.STALLED),
        {},
    ),
    (
        "never inside the startup grace",
        [cand("a-0", R.STALLED)],
        [PodState(name="a-0", uid="u-a-0", ready=False, started_at=NOW - 600)],
        [],
        1,
        None,
        {"a-0": "InStartupGrace"},
    ),
    (
        "a pod that was Ready once is judged inside the grace",
        [cand("a-0", R.STALLED)],
        [PodState(name="a-0", uid="u-a-0", ready=False, started_at=NOW - 600, served=True)],
        [],
        1,
        delete("a-0", R.STALLED),
        {},
    ),
    (
        "rate limit per hour",
        [cand("a-0", R.STALLED)],
        [down("a-0")],
        [NOW - 3000, NOW - 2000, NOW - 1000],
        1,
        None,
        {"a-0": "RateLimited"},
    ),
    (
        "rolls older than an hour do not count",
        [cand("a-0", R.STALLED)],
        [down("a-0")],
        [NOW - 4000] * 3,
        1,
        delete("a-0", R.STALLED),
        {},
    ),
    (
        "cooldown after the last roll",
        [cand("a-0", R.STALLED)],
        [down("a-0")],
        [NOW - 300],
        1,
        None,
        {"a-0": "Cooldown"},
    ),
    (
        "a spec change is not rate limited",
        [cand("a-0", R.SPEC_CHANGED)],
        TWO,
        [NOW - 100, NOW - 200, NOW - 300],
        2,
        drain("a-0", R.SPEC_CHANGED),
        {},
    ),
    ("a pod already gone is not deleted", [cand("a-9", R.STALLED)], TWO, [], 2, None, {"a-9": "PodGone"}),
    (
        "a terminating pod is not deleted again and counts as out",
        [cand("a-0", R.DRIFT), cand("a-1", R.SPEC_CHANGED)],
        [replace(ready("a-0"), terminating=True), ready("a-1")],
        [],
        2,
        None,
        {"a-0": "PodGone", "a-1": "AnotherReplicaOut"},
    ),
    (
        "a drain whose requests reached 0 ends in a delete (Completed)",
        [cand("a-0", R.SPEC_CHANGED)],
        [draining("a-0", NOW - 30, 0, R.SPEC_CHANGED), ready("a-1")],
        [],
        2,
        Delete(
            pod="a-0",
            uid="u-a-0",
            reason=R.SPEC_CHANGED,
            message="m (drained 30s: Completed)",
            drain=DrainResult.COMPLETED,
        ),
        {},
    ),
    (
        "no requests right after the gate went False is not yet a completed drain",
        [],
        [draining("a-0", NOW - 2, 0), ready("a-1")],
        [],
        2,
        None,
        {},
    ),
    (
        "requests still reached the pod after its gate fell (an endpoint list not yet updated): no delete until "
        "a settle time without any",
        [],
        [replace(draining("a-0", NOW - 30, 0), arrived=(NOW - 4, NOW - 2)), ready("a-1")],
        [],
        2,
        None,
        {},
    ),
    (
        "quiet for a settle time after the last late requests: the drain completes",
        [],
        [replace(draining("a-0", NOW - 30, 0), arrived=(NOW - 9, NOW - 6)), ready("a-1")],
        [],
        2,
        Delete(
            pod="a-0", uid="u-a-0", reason=R.DRIFT, message="m (drained 30s: Completed)", drain=DrainResult.COMPLETED
        ),
        {},
    ),
    (
        "requests that arrived before the gate fell do not hold the drain",
        [],
        [replace(draining("a-0", NOW - 30, 0), arrived=(NOW - 33, NOW - 29)), ready("a-1")],
        [],
        2,
        Delete(
            pod="a-0", uid="u-a-0", reason=R.DRIFT, message="m (drained 30s: Completed)", drain=DrainResult.COMPLETED
        ),
        {},
    ),
    (
        "late requests that never stop: drainSeconds still ends the drain (TimedOut)",
        [],
        [replace(draining("a-0", NOW - 1800, 0), arrived=(NOW - 3, NOW - 1)), ready("a-1")],
        [],
        2,
        Delete(
            pod="a-0", uid="u-a-0", reason=R.DRIFT, message="m (drained 1800s: TimedOut)", drain=DrainResult.TIMED_OUT
        ),
        {},
    ),
    (
        "a scrape from before the drain settled does not complete it",
        [],
        [replace(draining("a-0", NOW - 30, 0), in_flight_at=NOW - 28), ready("a-1")],
        [],
        2,
        None,
        {},
    ),
    (
        "requests still running: the drain waits and holds the pod's candidate",
        [cand("a-0", R.SPEC_CHANGED)],
        [draining("a-0", NOW - 60, 1, R.SPEC_CHANGED), ready("a-1")],
        [],
        2,
        None,
        {"a-0": "Draining"},
    ),
    (
        "drainSeconds passed: deleted with TimedOut",
        [],
        [draining("a-0", NOW - 1800, 1), ready("a-1")],
        [],
        2,
        Delete(
            pod="a-0", uid="u-a-0", reason=R.DRIFT, message="m (drained 1800s: TimedOut)", drain=DrainResult.TIMED_OUT
        ),
        {},
    ),
    (
        "an engine that stops answering mid-drain for a stall window is deleted (NotDrained)",
        [],
        [replace(draining("a-0", NOW - 60, None), unanswered_since=NOW - 30), ready("a-1")],
        [],
        2,
        Delete(
            pod="a-0", uid="u-a-0", reason=R.DRIFT, message="m (drained 60s: NotDrained)", drain=DrainResult.NOT_DRAINED
        ),
        {},
    ),
    (
        "one unanswered scrape mid-drain is a busy engine, not a dead one: the drain goes on",
        [],
        [replace(draining("a-0", NOW - 60, None), unanswered_since=NOW - 2), ready("a-1")],
        [],
        2,
        None,
        {},
    ),
    (
        "a pod that stalls mid-drain is deleted at once",
        [cand("a-0", R.STALLED)],
        [draining("a-0", NOW - 60, 2), ready("a-1")],
        [],
        2,
        delete("a-0", R.STALLED),
        {},
    ),
    (
        "a drain in progress uses the budget: another drift waits",
        [cand("a-1", R.DRIFT)],
        [draining("a-0", NOW - 60, 2), ready("a-1"), ready("a-2")],
        [],
        3,
        None,
        {"a-1": "AnotherReplicaOut"},
    ),
    (
        "the finished drain is the pass's decision; others wait for the next",
        [cand("a-1", R.STALLED)],
        [draining("a-0", NOW - 60, 0), down("a-1")],
        [],
        2,
        Delete(
            pod="a-0", uid="u-a-0", reason=R.DRIFT, message="m (drained 60s: Completed)", drain=DrainResult.COMPLETED
        ),
        {"a-1": "OneDecisionPerPass"},
    ),
]


@pytest.mark.parametrize(
    ("candidates", "pods", "history", "replicas", "action", "held"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decision(
    candidates: list[Candidate],
    pods: list[PodState],
    history: list[float],
    replicas: int,
    action: object,
    held: dict[str, str],
) -> None:
    if action == "max2":
        decision = decide(
            candidates=candidates, pods=pods, history=history, now=NOW, cfg=cfg(replicas, max_unavailable=2)
        )
        action = drain("a-0", R.SPEC_CHANGED)
    else:
        decision = run(candidates, pods, tuple(history), replicas=replicas)
    assert decision.action == action
    assert rules(decision) == held


def test_drain_seconds_zero_deletes_without_draining() -> None:
    decision = decide(
        candidates=[cand("a-0", R.SPEC_CHANGED)], pods=TWO, history=[], now=NOW, cfg=cfg(2, drain_seconds=0)
    )
    assert decision == Decision(action=delete("a-0", R.SPEC_CHANGED))


def test_refusals_are_distinguished_from_waits() -> None:
    decision = run([cand("a-0", R.DRIFT), cand("a-1", R.SPEC_CHANGED)], [ready("a-0"), down("a-1")], replicas=2)
    assert [(h.candidate.pod, h.rule, h.refused) for h in decision.held] == [("a-0", "LastReadyReplica", True)]
    assert decision.action == delete("a-1", R.SPEC_CHANGED)
    assert Held(candidate=cand("a-0", R.DRIFT), rule="Draining", message="").refused is False


def test_a_spec_change_never_takes_two_serving_pods_out_over_passes() -> None:
    """Simulated passes: the decision's drains and deletes applied, replacements loading for a while."""
    pods = {n: ready(n) for n in ("a-0", "a-1", "a-2")}
    pods["a-2"] = down("a-2")  # stalled
    t, out_max, deleted = NOW, 0, []
    stale = {"a-0", "a-1", "a-2"}
    loading: dict[str, float] = {}
    for _ in range(200):
        t += 10
        for name, since in list(loading.items()):
            if t - since > 120:
                pods[name] = ready(name)
                del loading[name]
        cands = [cand(n, R.SPEC_CHANGED) for n in sorted(stale) if n in pods]
        decision = decide(candidates=cands, pods=list(pods.values()), history=[], now=t, cfg=cfg(3))
        act = decision.action
        if isinstance(act, Drain):
            pods[act.pod] = draining(act.pod, t, 1, R.SPEC_CHANGED)
        elif isinstance(act, Delete):
            deleted.append((act.pod, act.drain))
            stale.discard(act.pod)
            pods[act.pod] = PodState(name=act.pod, uid=f"new-{act.pod}", ready=False, started_at=t)
            loading[act.pod] = t
        for name, pod in pods.items():  # requests on a draining pod finish after 30 s
            if pod.draining_since is not None and t - pod.draining_since >= 30:
                pods[name] = replace(pod, in_flight=0, in_flight_at=t)
        out_max = max(out_max, sum(1 for p in pods.values() if not p.healthy))
        if not stale and not loading:
            break
    assert deleted == [("a-2", DrainResult.NOT_DRAINED), ("a-0", DrainResult.COMPLETED), ("a-1", DrainResult.COMPLETED)]
    assert out_max == 1


def test_two_simultaneous_stalls_are_both_rolled_within_two_cooldowns() -> None:
    """Both replicas stall at NOW; passes every 5 s ask for both; each roll replaces its pod by a loading one."""
    pods = {n: down(n) for n in ("a-0", "a-1")}
    history: list[float] = []
    rolled: dict[str, float] = {}
    t = NOW
    while len(rolled) < 2 and t < NOW + 3 * HEALTH.rolls.cooldown_seconds:
        cands = [cand(n, R.STALLED) for n in pods if n not in rolled]
        act = decide(candidates=cands, pods=list(pods.values()), history=history, now=t, cfg=cfg(2)).action
        if isinstance(act, Delete):
            rolled[act.pod], history = t, [*history, t]
            pods[act.pod] = PodState(name=act.pod, uid=f"new-{act.pod}", ready=False, started_at=t)  # loads
        t += 5.0
    assert set(rolled) == {"a-0", "a-1"}
    assert max(rolled.values()) - NOW <= 2 * HEALTH.rolls.cooldown_seconds
    assert max(rolled.values()) - min(rolled.values()) >= HEALTH.rolls.cooldown_seconds


def test_zero_per_hour_means_never() -> None:
    health = HealthSpec(rolls=RollSpec(max_per_hour=0))
    config = DisruptionConfig(replicas=1, health=health)
    decision = decide(candidates=[cand("a-0", R.STALLED)], pods=[down("a-0")], history=[], now=NOW, cfg=config)
    assert decision.action is None
    assert rules(decision) == {"a-0": "RateLimited"}
