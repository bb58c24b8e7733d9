"""The startup grace, one rule (`HealthSpec.in_startup_grace`): what it says, and that the health loop's
loading figure and the disruption decision's InStartupGrace refusal say the same for every pod."""

import itertools

import pytest

from ascend_operator.api.health import HealthSpec
from ascend_operator.disruption import Candidate, RollReason
from ascend_operator.disruption.decide import DisruptionConfig, RuleInput, first_refusal
from ascend_operator.disruption.model import PodState

CFG = HealthSpec(startup_grace_seconds=600)
NOW = 10_000.0


@pytest.mark.parametrize(
    ("case", "started_at", "served", "loading"),
    [
        ("not started yet", None, False, True),
        ("started a minute ago, never Ready", NOW - 60, False, True),
        ("one second before the grace ends", NOW - 599, False, True),
        ("the grace is over", NOW - 600, False, False),
        ("long ago, never Ready: no longer protected", NOW - 7200, False, False),
        ("started a minute ago and already served: the grace ends early", NOW - 60, True, False),
        ("not started but served (a resumed gate)", None, True, False),
    ],
)
def test_a_pod_is_loading_while_never_ready_inside_its_grace(
    case: str, started_at: float | None, served: bool, loading: bool
) -> None:
    assert CFG.in_startup_grace(started_at, served=served, now=NOW) is loading, case


def test_no_grace_at_zero_seconds() -> None:
    assert not HealthSpec(startup_grace_seconds=0).in_startup_grace(NOW, served=False, now=NOW)


STARTS = [None, NOW - 1, NOW - 599, NOW - 600, NOW - 601, NOW - 86400]


@pytest.mark.parametrize(("started_at", "served"), list(itertools.product(STARTS, [False, True])))
def test_the_disruption_decision_refuses_a_health_roll_exactly_while_the_pod_is_loading(
    started_at: float | None, served: bool
) -> None:
    pod = PodState(name="svc-0", uid="u0", ready=False, started_at=started_at, served=served)
    cand = Candidate(pod="svc-0", uid="u0", reason=RollReason.STALLED)
    rule_input = RuleInput(
        cand=cand, target=pod, pods=[pod], history=[], now=NOW, cfg=DisruptionConfig(replicas=1, health=CFG)
    )
    refusal = first_refusal(rule_input)
    refused = refusal is not None and refusal[0] == "InStartupGrace"
    assert refused is CFG.in_startup_grace(started_at, served=served, now=NOW)
