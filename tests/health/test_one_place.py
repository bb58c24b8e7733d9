"""A detector is one place: its entry in the judge's chain (health/judge.py `CHAIN`, its detection in its
own module) and its config model in api/health.py. Nothing else names its verdict: the status' causes,
the monitor's faults and the machine's kept gates derive from the entries.

Why a test: before the chain, a detector's fault string was carried by judge.py, monitor.py and causes.py
alike, and a new one missing from either list was silently not a cause of the service's status.
"""

from pathlib import Path

import pytest
from pydantic import BaseModel

from ascend_operator.api.health import HealthSpec
from ascend_operator.controller import causes, monitor
from ascend_operator.controller.views import pod_view
from ascend_operator.health.judge import CHAIN, FAULTS, PENDING, Rule, Verdict
from tests.fixtures.spellings import string_literals

PACKAGE = Path(monitor.__file__).resolve().parents[1]
#: Where a verdict reason may be spelt besides its entry: a detector's own findings (stall, drift) and the
#: roll reasons (api/reasons.py `RollReason`: a roll is recorded under the verdict that asked for it).
DETECTOR_VOCABULARY = {"health/stall.py", "health/drift.py", "api/reasons.py"}
#: `spec.health` models no chain entry reads, and who does.
NOT_VERDICTS = {"rolls": "the disruption decision's rate limit", "recycle": "health/recycle.py, a candidate by age"}


def literals() -> dict[str, dict[str, int]]:
    """Verdict reason -> {module: how many string literals spell it} over the operator package."""
    return string_literals({rule.reason for rule in CHAIN})


def test_each_reason_is_spelt_once_in_its_entry_and_nowhere_else() -> None:
    for reason, where in literals().items():
        assert where.get("health/judge.py", 0) <= 1, (reason, where)
        assert set(where) <= {"health/judge.py", *DETECTOR_VOCABULARY}, (reason, where)


def test_every_reason_is_unique() -> None:
    reasons = [rule.reason for rule in CHAIN]
    assert len(set(reasons)) == len(reasons)


def test_every_entry_names_a_config_model_of_spec_health_and_every_model_has_a_reader() -> None:
    models = {
        name: field.annotation
        for name, field in HealthSpec.model_fields.items()
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    }
    read = {rule.config for rule in CHAIN if rule.config is not None}
    assert read <= set(models), read - set(models)
    assert set(models) == read | set(NOT_VERDICTS), set(models) - read - set(NOT_VERDICTS)


def test_faults_are_the_first_causes_of_the_status_and_nothing_else_of_the_chain_is() -> None:
    assert causes.SEVERITY[: len(FAULTS)] == FAULTS
    assert FAULTS == ("NodeUnhealthy", "NPUFault", "WorkerGone", "ConfigMismatch", "Stalled")
    assert not {rule.reason for rule in CHAIN if not rule.fault} & set(causes.SEVERITY)
    assert causes.SEVERITY.index(FAULTS[-1]) < causes.SEVERITY.index(causes.CONTAINER_FAULTS[0])
    assert not PENDING & set(FAULTS)


@pytest.mark.parametrize("rule", CHAIN, ids=[rule.reason for rule in CHAIN])
def test_a_verdict_reaches_the_status_as_the_replica_cause_exactly_when_its_rule_is_a_fault(rule: Rule) -> None:
    pod = pod_view({"metadata": {"name": "svc-0", "uid": "u0"}, "status": {"phase": "Running"}})
    verdict = Verdict(ready=rule.ready, reason=rule.reason, message="found")
    faults = monitor._faults([pod], {"u0": verdict})
    cause = causes.pod_cause(pod, health=faults.get("u0"))
    assert cause is not None
    if rule.fault:
        assert (cause.reason, cause.message, cause.fault) == (rule.reason, "found", True)
    else:
        assert cause.reason == "WaitingForReplicas"
