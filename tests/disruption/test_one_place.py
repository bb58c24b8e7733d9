"""A kind of deletion is one place: its `RollReason` member (api/reasons.py, so the CRD enumerates it) and its row
in disruption/model.py `KINDS` (health or
planned, drained or not, counted by the hourly limit, a removal or a recreation). The rule sets, the refusal
chain, the status' roll history, the events, the metrics and docs/disruption.md's table read those; nothing
else spells the reason.

Why a test: before the table, a kind's rules were its membership in four hand-listed sets, so a new health
reason left out of `HEALTH_REASONS` silently escaped the startup grace and the hourly limit, and nothing said
so. Here a member without its row fails, a reason spelt outside its entry fails, and each row is checked
against what the decision does with a candidate of that kind.
"""

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from ascend_operator.api.health import HealthSpec, RollSpec
from ascend_operator.api.status import Roll
from ascend_operator.disruption import (
    HEALTH_REASONS,
    KINDS,
    PLANNED_REASONS,
    REMOVAL_REASONS,
    SERVING_REASONS,
    Candidate,
    Delete,
    DisruptionConfig,
    Drain,
    PodState,
    RollReason,
    decide,
)
from ascend_operator.disruption import model as disruption_model
from ascend_operator.disruption.docs import kinds_table, table_in
from tests.fixtures.spellings import string_literals

PACKAGE = Path(disruption_model.__file__).resolve().parents[1]
ENTRY = "api/reasons.py"
#: Spellings that should read the entry and do not yet, in files another change owns. Each must still be
#: there (a test below fails once it is gone, so the allowance goes with it).
KNOWN: dict[str, set[str]] = {}


def spelt() -> dict[str, dict[str, int]]:
    """Roll reason -> {module: how many string literals spell it} over the operator package."""
    return string_literals({reason.value for reason in RollReason})


def test_every_reason_has_its_row_and_every_row_a_reason() -> None:
    assert list(KINDS) == list(RollReason), set(RollReason) ^ set(KINDS)
    assert all(kind.why for kind in KINDS.values())


def test_each_reason_is_spelt_once_in_its_entry_and_nowhere_else() -> None:
    found = spelt()
    for reason in RollReason:
        where = dict(found.get(reason.value, {}))
        assert where.pop(ENTRY, 0) == 1, (reason, found.get(reason.value))
        allowed = {m for m, spellings in KNOWN.items() if reason.value in spellings}
        assert set(where) <= allowed, (reason, where)


def test_every_allowance_is_still_needed() -> None:
    found = spelt()
    for module, reasons in KNOWN.items():
        for reason in reasons:
            assert module in found.get(reason, {}), f"{module} no longer spells {reason}: drop its allowance"


def test_the_rule_sets_are_the_rows() -> None:
    assert {r for r, k in KINDS.items() if k.health} == HEALTH_REASONS
    assert {r for r, k in KINDS.items() if k.serving} == SERVING_REASONS
    assert {r for r, k in KINDS.items() if k.drains} == PLANNED_REASONS
    assert {r for r, k in KINDS.items() if k.removes} == REMOVAL_REASONS


def test_the_refusal_chain_names_no_kind() -> None:
    """decide.py reads the rows' properties, so a new kind needs no rule edited."""
    tree = ast.parse((PACKAGE / "disruption/decide.py").read_text())
    named = [
        ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and ast.unparse(n.value) == "RollReason"
    ]
    assert not named, named


def test_the_docs_table_is_the_rows() -> None:
    page = (PACKAGE.parents[2] / "docs" / "disruption.md").read_text()
    assert table_in(page) == kinds_table(), (
        "regenerate the table: .venv/bin/python -m ascend_operator.disruption.docs docs/disruption.md"
    )


def test_the_status_enumerates_every_kind() -> None:
    """status.rolls[].reason is the enum itself, so the CRD's schema and docs/api.md list every kind."""
    annotation = Roll.model_fields["reason"].annotation
    assert annotation is RollReason


NOW = 100_000.0
HEALTH = HealthSpec(startup_grace_seconds=1800, rolls=RollSpec(max_per_hour=1, cooldown_seconds=600))
SERVING = PodState(name="p", uid="u", ready=True, started_at=NOW - 7200, served=True, in_flight=2)
OTHER = PodState(name="q", uid="v", ready=True, started_at=NOW - 7200, served=True, in_flight=2)
LOADING = replace(SERVING, ready=False, started_at=NOW - 60, served=False)


def held_by(reason: RollReason, pods: list[PodState], history: tuple[float, ...] = ()) -> str | None:
    cfg = DisruptionConfig(replicas=2, max_unavailable=1, health=HEALTH)
    decision = decide(
        candidates=[Candidate(pod="p", uid="u", reason=reason)], pods=pods, history=history, now=NOW, cfg=cfg
    )
    return decision.held[0].rule if decision.held else None


@pytest.mark.parametrize("reason", list(RollReason), ids=[r.value for r in RollReason])
def test_the_decision_does_what_the_row_says(reason: RollReason) -> None:
    kind = KINDS[reason]
    assert (held_by(reason, [LOADING, OTHER]) == "InStartupGrace") is kind.health
    assert (held_by(reason, [SERVING, OTHER], history=(NOW - 4000, NOW - 1000)) == "RateLimited") is kind.health
    assert (held_by(reason, [SERVING, replace(OTHER, ready=False)]) == "LastReadyReplica") is kind.serving
    cfg = DisruptionConfig(replicas=2, max_unavailable=1, health=HEALTH)
    action = decide(
        candidates=[Candidate(pod="p", uid="u", reason=reason)], pods=[SERVING, OTHER], history=(), now=NOW, cfg=cfg
    ).action
    assert isinstance(action, Drain if kind.drains else Delete), action
    # only a forced kind deletes a pod already terminating (on a lost node nothing else ever finishes it)
    terminating = replace(SERVING, ready=False, terminating=True)
    assert (held_by(reason, [terminating, OTHER]) == "PodGone") is not kind.force
