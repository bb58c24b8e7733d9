"""The API reference tables of docs/api.md, the spec's and the status's, generated from the models so they
cannot drift from them: an enum-typed field lists its values (the roll reasons of status.rolls, the router
policies), taken from the enum the CRD's schema enumerates.

`python -m ascend_operator.reference docs/api.md` (`make docs`) rewrites the tables between the page's api
and status markers, with the vLLM flag each field renders (the contract's, joined there: the api imports
nothing); tests/unit/test_readme.py fails while the page differs from the models.
"""

import ast
import inspect
import textwrap
from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ascend_operator.api.autoscaling import ScaleReason
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
from ascend_operator.api.revision import RolloutPhase
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.api.status import (
    AUTOSCALING,
    AVAILABLE,
    DEGRADED,
    INFERENCE_POOL_READY,
    PROGRESSING,
    READY,
    ROLLOUT_HEALTHY,
    AscendInferenceServiceStatus,
)


def model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field's annotation holds (itself, or one member of a union such as `X | None`)."""
    candidates = [annotation, *getattr(annotation, "__args__", ())]
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)


def _values(annotation: Any) -> str:
    """ " One of: `a`, `b`." for an enum-typed field (or a list of one), else ""."""
    stack, seen = [annotation], []
    while stack:
        item = stack.pop()
        if isinstance(item, type) and issubclass(item, Enum):
            seen.append(item)
        stack += getattr(item, "__args__", ())
    if not seen:
        return ""
    return " One of: " + ", ".join(f"`{member.value}`" for member in seen[0]) + "."


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        return ""
    value = info.default
    if value is None:
        return ""
    return f"`{getattr(value, 'value', value)}`"


def _rows(model: type[BaseModel], prefix: str, notes: Mapping[str, str]) -> list[tuple[str, str, str]]:
    rows = []
    for name, info in model.model_fields.items():
        path = f"{prefix}.{info.alias or name}"
        nested = model_of(info.annotation)
        text = " ".join(t for t in (info.description or "", notes.get(path, "")) if t) + _values(info.annotation)
        rows.append((path, _default(info), text.replace("|", "\\|").replace("\n", " ")))
        if nested is not None:
            rows += _rows(nested, path, notes)
    return rows


def api_table(
    model: type[BaseModel] = AscendInferenceServiceSpec, prefix: str = "spec", *, notes: Mapping[str, str] = {}
) -> str:
    """A Markdown table of every field of `model` (the spec by default): path, default, description, and
    after it the note `notes` has for the field's path (`spec.engine.maxModelLen`: the vLLM flag it renders,
    which the api cannot know: ascend_operator/reference.py joins them)."""
    lines = ["| field | default | description |", "|---|---|---|"]
    lines += [f"| `{path}` | {default} | {text} |" for path, default, text in _rows(model, prefix, notes)]
    return "\n".join(lines) + "\n"


def status_table() -> str:
    """The same table for the status the operator writes."""
    return api_table(AscendInferenceServiceStatus, "status")


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->\n", f"<!-- {name}:end -->"


def with_block(page: str, name: str, body: str) -> str:
    """`page` with the text between its `name` markers replaced by `body` (a generated part of a docs page)."""
    begin, end = _markers(name)
    head, rest = page.split(begin, 1)
    return head + begin + body + end + rest.split(end, 1)[1]


def block_in(page: str, name: str) -> str:
    """The text a page carries between its `name` markers."""
    begin, end = _markers(name)
    return page.split(begin, 1)[1].split(end, 1)[0]


def with_table(page: str, *, notes: Mapping[str, str] = {}, reason_notes: Mapping[str, str] = {}) -> str:
    """`page` with the text between its api, status and reasons markers replaced by the current tables."""
    page = with_block(with_block(page, "api", api_table(notes=notes)), "status", status_table())
    return with_block(page, "reasons", reasons_table(notes=reason_notes))


def table_in(page: str) -> str:
    """The table a page carries between its api markers."""
    return block_in(page, "api")


#: Where a condition's reason comes from when it is a replica's cause rather than the condition's own.
CAUSES: tuple[type[Enum], ...] = (ReplicaReason, VerdictReason, KubeletReason)
#: Every condition type the operator writes, what it says, and the enums of its reasons (its own first).
CONDITIONS: tuple[tuple[str, str, tuple[type[Enum], ...]], ...] = (
    (READY, "Every desired replica serves (`kubectl wait --for=condition=Ready`).", (ReadyReason, *CAUSES)),
    (AVAILABLE, "At least one replica serves.", (AvailableReason, *CAUSES)),
    (PROGRESSING, "The replicas move toward the spec.", (ProgressingReason,)),
    (DEGRADED, "Something the user has to fix.", (DegradedReason, *CAUSES)),
    (INFERENCE_POOL_READY, "With spec.routing.inferencePool: the owned pool is in sync.", (PoolReason,)),
    (AUTOSCALING, "With spec.autoscaling: the autoscaler decides spec.replicas.", (AutoscalingReason, ScaleReason)),
    (ROLLOUT_HEALTHY, "The last spec change's rollout: going on or done, or rolled back.", (RolloutPhase,)),
)
#: Every enum of reasons the reference lists: what tests/unit/test_reasons.py holds the code and the page to.
REASON_ENUMS: tuple[type[Enum], ...] = (
    ReadyReason,
    AvailableReason,
    ProgressingReason,
    DegradedReason,
    PoolReason,
    AutoscalingReason,
    ScaleReason,
    RolloutPhase,
    *CAUSES,
    RolloutSignal,
    EventReason,
    RollReason,
    DrainResult,
    DetectorFinding,
)


def member_docs(enum: type[Enum]) -> dict[str, str]:
    """Each member's docstring (the string literal under it in the class body) by member name: Python keeps
    no such docstring at run time, so it is read from the source, as pydantic's use_attribute_docstrings does."""
    body = ast.parse(textwrap.dedent(inspect.getsource(enum))).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for stmt, after in zip(body.body, body.body[1:], strict=False):
        said = after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) else None
        if isinstance(stmt, ast.Assign) and isinstance(said, str):
            docs.update({t.id: inspect.cleandoc(said) for t in stmt.targets if isinstance(t, ast.Name)})
    return docs


def _oneline(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def enum_table(enum: type[Enum], notes: Mapping[str, str] = {}) -> str:
    """The enum's docstring, then a table of its values with what each means and what a user does: the
    member's docstring, else the note `notes` has for it (`RollReason.STALLED`: what a layer above the api
    says of it, joined by ascend_operator/reference.py)."""
    docs = {m.name: notes.get(f"{enum.__name__}.{m.name}", "") for m in enum} | member_docs(enum)
    lines = [f"`{enum.__name__}`: {_oneline(inspect.cleandoc(enum.__doc__ or ''))}", "", "| reason | meaning |"]
    lines += ["|---|---|", *(f"| `{m.value}` | {_oneline(docs.get(m.name, ''))} |" for m in enum)]
    return "\n".join(lines) + "\n"


def reasons_table(*, notes: Mapping[str, str] = {}) -> str:
    """docs/api.md's reasons section: every condition type with the enums of its reasons, each enum's values
    with their meaning, the event reasons and the deletion reasons, from the enums in api/reasons.py."""
    parts = ["### Conditions", "", "| condition | says | reasons |", "|---|---|---|"]
    for kind, says, enums in CONDITIONS:
        parts.append(f"| `{kind}` | {says} | {', '.join(f'`{e.__name__}`' for e in enums)} |")
    parts.append("")
    listed: list[type[Enum]] = []
    for enum in (e for _, _, enums in CONDITIONS for e in enums):
        if enum not in listed:
            listed.append(enum)
            parts.append(enum_table(enum, notes))
    parts += ["### Rollouts", "", enum_table(RolloutSignal, notes)]
    parts += ["### Events", "", enum_table(EventReason, notes), "### Deletions", "", enum_table(RollReason, notes)]
    parts.append(enum_table(DrainResult, notes))
    parts += ["### Detector findings", "", enum_table(DetectorFinding, notes)]
    return "\n".join(parts)
