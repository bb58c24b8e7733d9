"""The API reference table in README.md, generated from the models so it cannot drift from them."""

from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ascend_operator.api.spec import AscendInferenceServiceSpec


def _model_of(annotation: Any) -> type[BaseModel] | None:
    candidates = [annotation, *getattr(annotation, "__args__", ())]
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        return ""
    value = info.default
    if value is None:
        return ""
    return f"`{getattr(value, 'value', value)}`"


def _rows(model: type[BaseModel], prefix: str) -> list[tuple[str, str, str]]:
    rows = []
    for name, info in model.model_fields.items():
        path = f"{prefix}.{info.alias or name}"
        nested = _model_of(info.annotation)
        description = (info.description or "").replace("|", "\\|").replace("\n", " ")
        rows.append((path, _default(info), description))
        if nested is not None:
            rows += _rows(nested, path)
    return rows


def api_table() -> str:
    """A Markdown table of every spec field: path, default, description."""
    lines = ["| field | default | description |", "|---|---|---|"]
    lines += [f"| `{path}` | {default} | {text} |" for path, default, text in _rows(AscendInferenceServiceSpec, "spec")]
    return "\n".join(lines) + "\n"
