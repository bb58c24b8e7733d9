"""The API reference tables of docs/api.md, the spec's and the status's, generated from the models so they
cannot drift from them: an enum-typed field lists its values (the roll reasons of status.rolls, the router
policies), taken from the enum the CRD's schema enumerates.

`python -m ascend_operator.reference docs/api.md` (`make docs`) rewrites the tables between the page's api
and status markers, with the vLLM flag each field renders (the contract's, joined there: the api imports
nothing); tests/unit/test_readme.py fails while the page differs from the models.
"""

from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.api.status import AscendInferenceServiceStatus


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


def with_table(page: str, *, notes: Mapping[str, str] = {}) -> str:
    """`page` with the text between its api and status markers replaced by the current tables."""
    return with_block(with_block(page, "api", api_table(notes=notes)), "status", status_table())


def table_in(page: str) -> str:
    """The table a page carries between its api markers."""
    return block_in(page, "api")
