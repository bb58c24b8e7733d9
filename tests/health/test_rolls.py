"""The roll policy, table-driven: rolls never storm and never judge a loading engine."""

import pytest

from ascend_operator.api.health import HealthSpec, RollSpec
from ascend_operator.health.rolls import PodState, RollReason, decide_roll

NOW = 100_000.0
CFG = HealthSpec(startup_grace_seconds=1800, rolls=RollSpec(max_per_hour=3, cooldown_seconds=600))


def pods(*states: tuple[str, bool, bool, float | None]) -> list[PodState]:
    return [PodState(name=n, ready=r, terminating=t, started_at=s) for n, r, t, s in states]


OLD = NOW - 7200
TWO_READY = pods(("a-0", True, False, OLD), ("a-1", True, False, OLD))

CASES = [
    ("stall on a healthy service rolls", "a-0", RollReason.STALLED, TWO_READY, [], "Allowed"),
    (
        "never inside the startup grace",
        "a-0",
        RollReason.STALLED,
        pods(("a-0", True, False, NOW - 600), ("a-1", True, False, OLD)),
        [],
        "InStartupGrace",
    ),
    (
        "a pod that was Ready once is in service even inside the grace",
        "a-0",
        RollReason.STALLED,
        [
            PodState(name="a-0", ready=True, terminating=False, started_at=NOW - 600, served=True),
            PodState(name="a-1", ready=True, terminating=False, started_at=OLD),
        ],
        [],
        "Allowed",
    ),
    ("not-started pod is in grace", "a-0", RollReason.STALLED, pods(("a-0", False, False, None)), [], "InStartupGrace"),
    ("rate limit per hour", "a-0", RollReason.STALLED, TWO_READY, [NOW - 3000, NOW - 2000, NOW - 1000], "RateLimited"),
    ("rolls older than an hour do not count", "a-0", RollReason.STALLED, TWO_READY, [NOW - 4000] * 3, "Allowed"),
    ("cooldown after the last roll", "a-0", RollReason.STALLED, TWO_READY, [NOW - 300], "Cooldown"),
    (
        "planned rolls go one replica at a time",
        "a-0",
        RollReason.DRIFT,
        pods(("a-0", True, False, OLD), ("a-1", False, False, OLD)),
        [],
        "AnotherReplicaOut",
    ),
    (
        "two stalled replicas do not hold each other out",
        "a-0",
        RollReason.STALLED,
        pods(("a-0", False, False, OLD), ("a-1", False, False, OLD)),
        [],
        "Allowed",
    ),
    (
        "a stall never waits behind a healthy replica's planned roll",
        "a-0",
        RollReason.STALLED,
        pods(("a-0", False, False, OLD), ("a-1", True, True, OLD), ("a-2", False, False, NOW - 60)),
        [NOW - 700],
        "Allowed",
    ),
    (
        "the second of two stalls waits out the cooldown",
        "a-1",
        RollReason.STALLED,
        pods(("a-0", False, False, NOW - 60), ("a-1", False, False, OLD)),
        [NOW - 60],
        "Cooldown",
    ),
    (
        "a terminating replica counts as out",
        "a-0",
        RollReason.DRIFT,
        pods(("a-0", True, False, OLD), ("a-1", True, True, OLD)),
        [],
        "AnotherReplicaOut",
    ),
    (
        "drift never rolls the last ready replica",
        "a-0",
        RollReason.DRIFT,
        pods(("a-0", True, False, OLD)),
        [],
        "LastReadyReplica",
    ),
    (
        "age never rolls the last ready replica",
        "a-0",
        RollReason.MAX_AGE,
        pods(("a-0", True, False, OLD)),
        [],
        "LastReadyReplica",
    ),
    ("a stall rolls even the only replica", "a-0", RollReason.STALLED, pods(("a-0", True, False, OLD)), [], "Allowed"),
    ("drift with another ready replica rolls", "a-1", RollReason.DRIFT, TWO_READY, [], "Allowed"),
    ("a pod already gone is not rolled", "a-9", RollReason.STALLED, TWO_READY, [], "PodGone"),
]


@pytest.mark.parametrize(
    ("pod", "reason", "states", "history", "rule"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_roll_policy(pod: str, reason: RollReason, states: list[PodState], history: list[float], rule: str) -> None:
    decision = decide_roll(pod=pod, reason=reason, pods=states, history=history, now=NOW, cfg=CFG)
    assert decision.rule == rule
    assert decision.allowed is (rule == "Allowed")
    assert decision.message


def test_two_simultaneous_stalls_are_both_rolled_within_two_cooldowns() -> None:
    """Both replicas stall at NOW; passes every 5 s ask for both; each roll replaces its pod by a loading one."""
    states = {"a-0": (False, OLD), "a-1": (False, OLD)}
    history: list[float] = []
    rolled: dict[str, float] = {}
    t = NOW
    while len(rolled) < 2 and t < NOW + 3 * CFG.rolls.cooldown_seconds:
        for name in [n for n in states if n not in rolled]:
            view = [PodState(name=n, ready=r, terminating=False, started_at=s) for n, (r, s) in states.items()]
            if decide_roll(pod=name, reason=RollReason.STALLED, pods=view, history=history, now=t, cfg=CFG).allowed:
                rolled[name], history = t, [*history, t]
                states[name] = (False, t)  # the successor loads
                break
        t += 5.0
    assert set(rolled) == {"a-0", "a-1"}
    assert max(rolled.values()) - NOW <= 2 * CFG.rolls.cooldown_seconds
    assert max(rolled.values()) - min(rolled.values()) >= CFG.rolls.cooldown_seconds


def test_zero_per_hour_means_never() -> None:
    cfg = HealthSpec(rolls=RollSpec(max_per_hour=0))
    decision = decide_roll(pod="a-0", reason=RollReason.STALLED, pods=TWO_READY, history=[], now=NOW, cfg=cfg)
    assert decision.rule == "RateLimited"
