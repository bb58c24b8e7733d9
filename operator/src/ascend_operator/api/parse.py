"""Parse a custom resource body into the spec model once, with errors that name the field.

Both the CLI (files) and the operator (watch events) go through here, so a spec that `aisctl render`
rejects is rejected by the operator with the same words.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ascend_operator.api.constants import API_VERSION, KIND
from ascend_operator.api.spec import AscendInferenceServiceSpec


class SpecError(ValueError):
    """A body that does not parse into a spec; `problems` name the fields."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True, kw_only=True)
class ParsedService:
    """An AscendInferenceService with its spec parsed."""

    name: str
    namespace: str
    uid: str | None
    generation: int | None
    spec: AscendInferenceServiceSpec


def _location(loc: tuple[int | str, ...]) -> str:
    path = "spec"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def parse_spec(raw: Mapping[str, Any]) -> AscendInferenceServiceSpec:
    """Validate a spec mapping (camelCase keys) into the model."""
    try:
        return AscendInferenceServiceSpec.model_validate(dict(raw))
    except ValidationError as exc:
        problems = [f"{_location(err['loc'])}: {err['msg']}" for err in exc.errors()]
        raise SpecError(problems) from None


def parse_resource(body: Mapping[str, Any], *, default_namespace: str = "default") -> ParsedService:
    """Validate a whole AscendInferenceService object."""
    if body.get("kind") != KIND or body.get("apiVersion") != API_VERSION:
        raise SpecError([f"expected apiVersion {API_VERSION} kind {KIND}, got {body.get('apiVersion')} "
                         f"{body.get('kind')}"])  # fmt: skip
    meta = body.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise SpecError(["metadata.name: required"])
    spec = body.get("spec")
    if not isinstance(spec, Mapping):
        raise SpecError(["spec: required"])
    return ParsedService(
        name=str(name),
        namespace=str(meta.get("namespace") or default_namespace),
        uid=meta.get("uid"),
        generation=meta.get("generation"),
        spec=parse_spec(spec),
    )
