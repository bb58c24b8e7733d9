"""The disruption refusals as one ordered chain, table-tested rule by rule (cert-manager's policy chains):
each row is one candidate and what it sees, and the rule that holds it, or None when every rule allows it.
Rows where several rules would refuse show the order: the first in the chain wins."""

from dataclasses import replace

import pytest

from ascend_operator.api.health import HealthSpec, RollSpec
from ascend_operator.disruption import ROLL_RULES, Candidate, DisruptionConfig, PodState, RollReason
from ascend_operator.disruption.decide import REFUSALS, RuleInput, first_refusal

NOW = 100_000.0
R = RollReason
CFG = DisruptionConfig(
    replicas=2,
    max_unavailable=1,
    health=HealthSpec(startup_grace_seconds=1800, rolls=RollSpec(max_per_hour=3, cooldown_seconds=600)),
)
SERVING = PodState(name="p", uid="u", ready=True, started_at=NOW - 7200, served=True)
OTHER = PodState(name="q", uid="v", ready=True, started_at=NOW - 7200, served=True)
LOADING = replace(SERVING, ready=False, started_at=NOW - 60, served=False)
STALLED = replace(SERVING, ready=False)
OTHER_DOWN = replace(OTHER, ready=False)
HOURLY = (NOW - 3000, NOW - 2000, NOW - 1000)  # three health rolls in the last hour, the last 1000 s ago
RECENT = (NOW - 100,)  # one health roll 100 s ago: inside the cooldown
OLD = (NOW - 4000, NOW - 3700, NOW - 3601)  # older than an hour: neither limit counts them

# (id, reason, target, other pods, history, the rule that holds it)
Row = tuple[str, RollReason, PodState | None, list[PodState], tuple[float, ...], str | None]
TABLE: list[Row] = [
    ("gone", R.STALLED, None, [OTHER], (), "PodGone"),
    ("terminating", R.SPEC_CHANGED, replace(SERVING, terminating=True), [OTHER], (), "PodGone"),
    ("gone beats everything", R.DRIFT, None, [], HOURLY, "PodGone"),
    ("loading stall", R.STALLED, LOADING, [OTHER], (), "InStartupGrace"),
    ("grace beats the hourly limit", R.STALLED, LOADING, [OTHER], HOURLY, "InStartupGrace"),
    ("grace is for health reasons only", R.SPEC_CHANGED, LOADING, [OTHER], (), None),
    ("served once: grace over", R.STALLED, replace(LOADING, served=True), [OTHER], (), None),
    ("hourly limit", R.STALLED, STALLED, [OTHER], HOURLY, "RateLimited"),
    ("hourly limit beats cooldown", R.DRIFT, SERVING, [OTHER], (*HOURLY[:2], NOW - 10), "RateLimited"),
    ("an hour ago counts no more", R.STALLED, STALLED, [OTHER], OLD, None),
    ("cooldown", R.STALLED, STALLED, [OTHER], RECENT, "Cooldown"),
    ("cooldown beats last ready", R.DRIFT, SERVING, [OTHER_DOWN], RECENT, "Cooldown"),
    ("spec changes are not rate limited", R.SPEC_CHANGED, SERVING, [OTHER], HOURLY, None),
    ("last ready drift", R.DRIFT, SERVING, [OTHER_DOWN], (), "LastReadyReplica"),
    ("last ready age", R.MAX_AGE, SERVING, [], (), "LastReadyReplica"),
    ("last ready beats the budget", R.DRIFT, SERVING, [OTHER_DOWN], (), "LastReadyReplica"),
    ("a stall of the last pod goes", R.STALLED, STALLED, [OTHER_DOWN], (), None),
    ("budget", R.SPEC_CHANGED, SERVING, [OTHER_DOWN], (), "AnotherReplicaOut"),
    ("budget for a topology switch", R.TOPOLOGY_CHANGED, SERVING, [OTHER_DOWN], (), "AnotherReplicaOut"),
    ("a pod serving nobody costs no budget", R.SCALE_DOWN, STALLED, [OTHER_DOWN], (), None),
    ("within the budget", R.SPEC_CHANGED, SERVING, [OTHER], (), None),
]


def _input(row: Row) -> RuleInput:
    _, reason, target, others, history, _ = row
    pods = [*([target] if target is not None else []), *others]
    return RuleInput(
        cand=Candidate(pod="p", uid="u", reason=reason), target=target, pods=pods, history=history, now=NOW, cfg=CFG
    )


@pytest.mark.parametrize("row", TABLE, ids=[row[0] for row in TABLE])
def test_the_first_refusing_rule_holds_the_candidate(row: Row) -> None:
    refusal = first_refusal(_input(row))
    assert (refusal[0] if refusal else None) == row[-1]
    if refusal is not None:
        assert refusal[1]  # every refusal says why


def test_the_chain_is_every_rule_the_metrics_know_in_order() -> None:
    """Each rule of the chain refuses some row of the table, and the chain's order is ROLL_RULES' (the series
    the operator creates at 0)."""
    order = [next(v[0] for row in TABLE if (v := rule(_input(row)))[2]) for rule in REFUSALS]
    assert order == list(ROLL_RULES)
