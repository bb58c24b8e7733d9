"""Every reason the operator writes is a member of an enum in api/reasons.py, and docs/api.md lists every
member (issue 37 item 3).

mypy --strict already refuses a bare string where a reason parameter is typed with the enums; this test
also catches the places the types cannot see: a `reason=` keyword of an untyped callee, a readiness-gate
condition written as a dict, an event's reason passed positionally. It walks the operator's source for
string constants in those positions and fails on any that is no member.
"""

import ast
import json
import re
from enum import Enum

import pytest

from ascend_operator.api.docs import CONDITIONS, REASON_ENUMS, block_in, member_docs, reasons_table
from ascend_operator.api.reasons import (
    AutoscalingReason,
    AvailableReason,
    DegradedReason,
    DetectorFinding,
    DrainResult,
    EventReason,
    KubeletReason,
    PoolReason,
    ProgressingReason,
    ReadyReason,
    ReplicaReason,
    RolloutSignal,
    RollReason,
    VerdictReason,
)
from ascend_operator.api.rollout import AnalysisThresholds
from ascend_operator.api.status import AUTOSCALING, INFERENCE_POOL_READY, ROLLOUT_HEALTHY, Condition
from ascend_operator.controller.causes import CONTAINER_FAULTS
from ascend_operator.health.judge import CHAIN
from ascend_operator.reference import reason_notes
from ascend_operator.rollout_analysis import CHECKS, Figures, Input
from tests.fixtures.examples import ROOT

SOURCE = ROOT / "operator" / "src" / "ascend_operator"
API_PAGE = ROOT / "docs" / "api.md"
#: Files whose reasons are another API's words: the CRD's CEL rules name the API server's own field error
#: reasons (x-kubernetes-validations `reason: FieldValueInvalid`).
FOREIGN = {"crd.py"}
#: Keywords that carry a reason, and callees whose positional string arguments are a condition's or an
#: event's type, status and reason.
REASON_KEYWORDS = {"reason", "created", "removed"}
EMITTERS = {"events", "post", "Event", "ConditionRecord", "_cond", "_true", "_false"}
#: Positional words of those calls that are no reason: event types, condition statuses, condition types.
NOT_REASONS = {"Normal", "Warning", "True", "False", "Unknown"}
CAMEL = re.compile(r"^[A-Z][A-Za-z0-9]*$")
MEMBERS = {member.value for enum in REASON_ENUMS for member in enum}
NEW_ENUMS: tuple[type[Enum], ...] = (
    ReplicaReason,
    KubeletReason,
    VerdictReason,
    ReadyReason,
    AvailableReason,
    ProgressingReason,
    DegradedReason,
    PoolReason,
    AutoscalingReason,
    RolloutSignal,
    EventReason,
)


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _strings(node: ast.AST) -> list[ast.Constant]:
    return [node] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []


def reason_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, string) of every string constant in a reason position of the tree."""
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg in REASON_KEYWORDS:
                    found += _strings(kw.value)
            if _callee(node) in EMITTERS:
                found += [c for arg in node.args for c in _strings(arg) if CAMEL.match(str(c.value))]
        elif isinstance(node, ast.Dict):  # a condition written as a dict (the readiness gate)
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "reason" and value is not None:
                    found += _strings(value)
    return [(c.lineno, str(c.value)) for c in found if c.value not in NOT_REASONS]


def test_the_scan_finds_a_reason_literal_in_each_position() -> None:
    snippet = """
events("Warning", "Bogus1", "m")
ctx.events("Normal", "Bogus2", "m")
Cause(pod="p", reason="Bogus3", message="m")
ConditionRecord(READY, "False", "Bogus4", "m")
ensure(kube, events, PDB, created="Bogus5")
gate = {"type": GATE, "status": "False", "reason": "Bogus6"}
"""
    assert [s for _, s in reason_literals(ast.parse(snippet))] == [f"Bogus{i}" for i in range(1, 7)]


def test_every_reason_literal_in_the_operator_is_a_member() -> None:
    strays = []
    for path in sorted(SOURCE.rglob("*.py")):
        where = path.relative_to(SOURCE).as_posix()
        if where in FOREIGN:
            continue
        for line, said in reason_literals(ast.parse(path.read_text())):
            if said not in MEMBERS:
                strays.append(f"{where}:{line}: {said}")
    assert not strays, "a reason outside api/reasons.py: add it there (with what it means) and use the member"


def test_docs_list_every_reason_from_the_code() -> None:
    page = API_PAGE.read_text()
    listed = block_in(page, "reasons")
    assert listed == reasons_table(notes=reason_notes()), "regenerate docs/api.md: make docs"
    assert "| `ScaleDown` | more replicas than spec.replicas |" in listed  # a deletion says what it is
    missing = [f"{e.__name__}.{m.name}" for e in REASON_ENUMS for m in e if f"| `{m.value}` |" not in listed]
    assert not missing
    for kind in (INFERENCE_POOL_READY, AUTOSCALING, ROLLOUT_HEALTHY, "Ready", "Available", "Progressing", "Degraded"):
        assert f"| `{kind}` |" in listed


@pytest.mark.parametrize("enum", NEW_ENUMS, ids=lambda e: e.__name__)
def test_every_reason_says_when_it_is_set_and_what_to_do(enum: type[Enum]) -> None:
    docs = member_docs(enum)
    assert sorted(docs) == sorted(m.name for m in enum), "a member without a docstring"
    assert all(len(text) > 20 for text in docs.values())


def test_every_condition_reason_enum_is_listed_under_a_condition() -> None:
    under = {e for _, _, enums in CONDITIONS for e in enums}
    assert set(REASON_ENUMS) == under | {RolloutSignal, EventReason, RollReason, DrainResult, DetectorFinding}


def test_the_verdicts_are_the_judge_chain_and_the_drain() -> None:
    assert [rule.reason for rule in CHAIN] == [r for r in VerdictReason if r is not VerdictReason.DRAINING]
    rolls = {r.value for r in RollReason}
    shared = {v for v in VerdictReason if v.value in rolls}
    # a verdict that asks for the roll of the same name says it in the same word
    assert {r.reason for r in CHAIN if r.roll is not None and r.roll.value == r.reason.value} == shared


def test_the_kubelet_reasons_rank_the_container_faults() -> None:
    assert tuple(KubeletReason) == CONTAINER_FAULTS


def test_a_reason_on_the_wire_is_its_plain_string() -> None:
    """StrEnum members are written as their value: the status JSON and the events keep their words."""
    assert f"{ReplicaReason.WAITING_FOR_REPLICAS}" == "WaitingForReplicas"
    assert json.dumps({"reason": EventReason.POD_CREATED}) == '{"reason": "PodCreated"}'
    dumped = Condition(type="Ready", status="True", reason=ReadyReason.ALL_REPLICAS_READY).model_dump(mode="json")
    assert dumped["reason"] == "AllReplicasReady"
    assert type(dumped["reason"]) is str


def test_the_rollout_signals_are_the_analysis_checks_and_the_gone_canary() -> None:
    good = Figures(replicas=1, seconds=60.0, requests=100, ttft_p90=0.1, tpot_p90=0.02, tokens_per_request=20.0)
    asked = [check(Input(canary=good, baseline=good, thresholds=AnalysisThresholds())).reason for check in CHECKS]
    assert [*asked, RolloutSignal.CANARY_GONE] == list(RolloutSignal)
