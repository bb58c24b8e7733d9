"""Drift baselines survive an operator restart: dumped into the pod's annotation, restored on resume, so
an engine that is already slow after the restart is judged against what it did before, not learned anew."""

from ascend_operator.api.health import HealthSpec
from ascend_operator.api.reasons import VerdictReason
from ascend_operator.health.drift import Baseline, dump_baseline, load_baseline
from ascend_operator.health.judge import Verdict, mark_ready
from ascend_operator.health.machine import resume

LEARNED = Baseline(points={8: (0.05, 0.051, 0.049, 0.05), 16: (0.07,)})


def test_a_baseline_round_trips_through_its_annotation() -> None:
    text = dump_baseline(LEARNED)
    assert text == '{"8":[0.05,0.051,0.049,0.05],"16":[0.07]}'
    assert load_baseline(text) == Baseline(points=LEARNED.points)


def test_garbage_in_the_annotation_means_learn_again() -> None:
    assert load_baseline(None) is None
    assert load_baseline("not json") is None
    assert load_baseline('["a"]') is None
    assert load_baseline('{"8": ["x"]}') is None
    assert load_baseline('{"8": [-1.0], "16": [0.07]}') == Baseline(points={16: (0.07,)})


def test_a_resumed_pod_judges_against_the_restored_baseline() -> None:
    health = resume((True, "CanaryPassing"), load_baseline(dump_baseline(LEARNED)))
    assert health.served
    assert health.drift.baseline.reference(8, needed=HealthSpec().drift.baseline_windows) == 0.05


def test_a_pod_that_goes_unready_keeps_its_baseline() -> None:
    health = resume((True, "CanaryPassing"), LEARNED)
    ready = mark_ready(health, Verdict(ready=True, reason=VerdictReason.CANARY_PASSING, message=""), now=10.0)
    unready = mark_ready(ready, Verdict(ready=False, reason=VerdictReason.CANARY_FAILING, message=""), now=20.0)
    assert unready.ready_since is None
    assert unready.drift.baseline == LEARNED
