"""The judge's chain as a table: what each rule decides, and which of two findings wins when both hold.

Each row is a condition a pod can be in; a healthy, checked, canaried pod with none of them passes. The
table lists the rules in the order a user should see them win (a gone worker over everything; a
mismatched config over an engine that does not answer; a stall over a config still being checked; ...),
so reordering `CHAIN` or adding an entry without a row fails here.
"""

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest

from ascend_operator.api.health import HealthSpec
from ascend_operator.api.reasons import VerdictReason
from ascend_operator.disruption import RollReason
from ascend_operator.health.chips import ChipFinding
from ascend_operator.health.drift import Baseline, DriftTracker, StepWindow
from ascend_operator.health.group import GroupObservation, MissingWorker
from ascend_operator.health.judge import CHAIN, Facts, PodHealth, canary_cycle, judge
from ascend_operator.health.samples import EngineSample, RankSample

CFG = HealthSpec()
NOW = 100.0


@dataclass(frozen=True)
class Pod:
    state: PodHealth
    now: float = NOW
    group: GroupObservation | None = None


def busy(t: float, gen: float) -> EngineSample:
    return EngineSample(t=t, running=4, generation_tokens=gen, iterations=gen / 4, kv_usage=0.1)


def healthy() -> Pod:
    samples = tuple(busy(t, t * 10) for t in (80.0, 85.0, 90.0, 95.0, 100.0))
    return Pod(PodHealth(samples=samples, mismatches=(), last_canary=95.0, served=True, ready_since=10.0))


def node_unhealthy(p: Pod) -> Pod:
    finding = ChipFinding(node_wide=True, message="NodeD reports node atlas-0 UnHealthy")
    return replace(p, state=replace(p.state, chips=finding))


def npu_fault(p: Pod) -> Pod:
    message = "chip Ascend910-4 on node atlas-0: fault at level SeparateNPU (codes 80E18402)"
    finding = ChipFinding(node_wide=False, message=message, chip="Ascend910-4", level="SeparateNPU")
    return replace(p, state=replace(p.state, chips=finding))


def npu_pre_separate(p: Pod) -> Pod:
    message = "chip Ascend910-2 on node atlas-0: fault at level PreSeparateNPU (codes 81078603)"
    finding = ChipFinding(node_wide=False, message=message, chip="Ascend910-2", level="PreSeparateNPU", drain=True)
    return replace(p, state=replace(p.state, chips=finding))


def worker_gone(p: Pod) -> Pod:
    gone = MissingWorker(index=1, name="svc-0-1", why="is Failed", definite=True, lws_recreates=False)
    return replace(p, group=GroupObservation(leader="svc-0", size=2, local_ranks=1, missing=(gone,)))


def config_mismatch(p: Pod) -> Pod:
    return replace(p, state=replace(p.state, mismatches=("maxModelLen: expected 4096, engine reports 2048",)))


def not_answering(p: Pod) -> Pod:
    # no scrape answered for 4 intervals, nor a canary for 4 intervals and a whole canary cycle
    return replace(p, now=p.now + 4 * CFG.scrape_interval_seconds + canary_cycle(CFG))


def stalled(p: Pod) -> Pod:
    frozen = tuple(busy(t, 500.0) for t in (60.0, 70.0, 80.0, 90.0, 100.0))
    return replace(p, state=replace(p.state, samples=frozen))


def checking_config(p: Pod) -> Pod:
    return replace(p, state=replace(p.state, mismatches=None))


def canary_failing(p: Pod) -> Pod:
    return replace(p, state=replace(p.state, canary_failures=CFG.canary.failure_threshold))


def awaiting_canary(p: Pod) -> Pod:
    return replace(p, state=replace(p.state, last_canary=None))


def drifted(p: Pod) -> Pod:
    # baseline 0.1 s per step at batch 32, the last 180 s at 0.12 s: 20% over the 10% threshold
    baseline = Baseline(points={32: (0.1,) * CFG.drift.baseline_windows})
    windows = tuple(StepWindow(t_end=p.now - 30.0 * k, batch=32, step_seconds=0.12) for k in range(6))
    return replace(p, state=replace(p.state, drift=DriftTracker(baseline=baseline, windows=windows)))


def nothing(p: Pod) -> Pod:
    return p


Condition = Callable[[Pod], Pod]
#: (reason, condition, ready, roll, the PodHealth fields or group the condition sets), in precedence order.
TABLE: list[tuple[str, Condition, bool, RollReason | None, frozenset[str]]] = [
    ("NodeUnhealthy", node_unhealthy, False, RollReason.NODE_UNHEALTHY, frozenset({"chips"})),
    ("NPUFault", npu_fault, False, RollReason.NPU_FAULT, frozenset({"chips"})),
    ("WorkerGone", worker_gone, False, RollReason.STALLED, frozenset({"group"})),
    ("ConfigMismatch", config_mismatch, False, None, frozenset({"mismatches"})),
    ("EngineNotAnswering", not_answering, False, None, frozenset({"now"})),
    ("Stalled", stalled, False, RollReason.STALLED, frozenset({"samples"})),
    ("CheckingConfig", checking_config, False, None, frozenset({"mismatches"})),
    ("CanaryFailing", canary_failing, False, None, frozenset({"canary_failures"})),
    ("AwaitingCanary", awaiting_canary, False, None, frozenset({"last_canary"})),
    ("NPUPreSeparate", npu_pre_separate, True, RollReason.NPU_PRE_SEPARATE, frozenset({"chips"})),
    ("ThroughputDrift", drifted, True, RollReason.DRIFT, frozenset({"drift"})),
    ("CanaryPassing", nothing, True, None, frozenset()),
]


def verdict_of(p: Pod) -> tuple[str, bool, RollReason | None]:
    v = judge(p.state, now=p.now, cfg=CFG, group=p.group)
    return v.reason, v.ready, v.roll


def test_the_table_is_the_chain_in_its_order() -> None:
    assert [row[0] for row in TABLE] == [rule.reason for rule in CHAIN]


@pytest.mark.parametrize(("reason", "condition", "ready", "roll", "sets"), TABLE, ids=[row[0] for row in TABLE])
def test_each_rule_decides_alone(
    reason: str, condition: Condition, ready: bool, roll: RollReason | None, sets: frozenset[str]
) -> None:
    assert verdict_of(condition(healthy())) == (reason, ready, roll)


PAIRS = [(a, b) for a, b in itertools.combinations(TABLE, 2) if not a[4] & b[4]]


@pytest.mark.parametrize(("first", "later"), PAIRS, ids=[f"{a[0]}>{b[0]}" for a, b in PAIRS])
def test_the_earlier_rule_wins_when_both_hold(
    first: tuple[str, Condition, bool, RollReason | None, frozenset[str]],
    later: tuple[str, Condition, bool, RollReason | None, frozenset[str]],
) -> None:
    pod = healthy()
    assert verdict_of(later[1](pod))[0] == later[0]  # the later one holds on its own
    for both in (first[1](later[1](pod)), later[1](first[1](pod))):
        assert verdict_of(both) == first[:1] + first[2:4]


def test_every_pair_of_rules_is_ranked_but_those_on_one_field() -> None:
    # ConfigMismatch and CheckingConfig are one field's two values, and so are NodeUnhealthy, NPUFault and
    # NPUPreSeparate (the plugin's verdict names the node, or one chip and whether it lets the pod drain):
    # never two at once
    skipped = {(a[0], b[0]) for a, b in itertools.combinations(TABLE, 2) if a[4] & b[4]}
    assert skipped == {
        ("ConfigMismatch", "CheckingConfig"),
        ("NodeUnhealthy", "NPUFault"),
        ("NodeUnhealthy", "NPUPreSeparate"),
        ("NPUFault", "NPUPreSeparate"),
    }


def test_the_rule_answers_reason_message_and_whether_it_failed() -> None:
    by_reason = {rule.reason: rule for rule in CHAIN}
    pod = healthy()
    assert by_reason[VerdictReason.CONFIG_MISMATCH](Facts(state=pod.state, now=NOW, cfg=CFG)) == (
        "ConfigMismatch",
        "",
        False,
    )
    bad = config_mismatch(pod)
    assert by_reason[VerdictReason.CONFIG_MISMATCH](Facts(state=bad.state, now=NOW, cfg=CFG)) == (
        "ConfigMismatch",
        "maxModelLen: expected 4096, engine reports 2048",
        True,
    )


@pytest.mark.parametrize(("served", "roll"), [(True, RollReason.STALLED), (False, None)])
def test_a_gone_worker_during_the_groups_start_is_named_but_not_rolled(served: bool, roll: RollReason | None) -> None:
    pod = worker_gone(healthy())
    pod = replace(pod, state=replace(pod.state, served=served, ready_since=None if not served else 10.0))
    assert verdict_of(pod) == ("WorkerGone", False, roll)


def test_a_stall_names_its_ranks_with_the_pod_that_runs_them() -> None:
    def ranked(t: float, gen1: float) -> EngineSample:
        ranks = {
            "0": RankSample(running=2, generation_tokens=t * 10, iterations=t * 10 / 4, kv_usage=0.1),
            "1": RankSample(running=2, generation_tokens=gen1, iterations=gen1 / 4, kv_usage=0.1),
        }
        return replace(busy(t, t * 10 + gen1), ranks=ranks)

    samples = tuple(ranked(t, 500.0) for t in (60.0, 70.0, 80.0, 90.0, 100.0))
    pod = replace(healthy(), group=GroupObservation(leader="svc-0", size=2, local_ranks=1))
    v = judge(replace(pod.state, samples=samples), now=NOW, cfg=CFG, group=pod.group)
    assert (v.reason, v.ranks) == ("Stalled", ("1",))
    assert v.message.endswith("; rank 1 on svc-0-1")
