"""Parse a custom resource body into the spec model once, with errors that name the field.

Both the CLI (files) and the operator (watch events) go through here, so a spec that `aisctl render`
rejects is rejected by the operator with the same words.
"""

import copy
import difflib
import json
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from ascend_operator.api.constants import API_VERSION, KIND
from ascend_operator.api.spec import AscendInferenceServiceSpec

#: metadata.name: the Service is named after it, and Service names are DNS-1035 labels (a letter first,
#: no dots, at most 63 characters); the pods are `<name>-<index>`.
NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
NAME_MAX = 63
NAME_RULE = (
    "must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter and ending "
    f"with a letter or digit, at most {NAME_MAX} characters): the Service is named after it and the pods "
    "<name>-<index>"
)


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


def _model_class(annotation: Any) -> type[BaseModel] | None:
    """The model inside an annotation (`X`, `X | None`, `list[X]`), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_class(arg)
            if found is not None:
                return found
    return None


def field_names_at(loc: tuple[int | str, ...]) -> list[str]:
    """The camelCase field names of the object that holds the last element of `loc` under spec."""
    model: type[BaseModel] | None = AscendInferenceServiceSpec
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        by_alias = {f.alias or n: f for n, f in model.model_fields.items()}
        field = by_alias.get(part)
        model = _model_class(field.annotation) if field is not None else None
    if model is None:
        return []
    return [f.alias or n for n, f in model.model_fields.items()]


_TYPE_ERRORS = frozenset({"int_type", "bool_type", "float_type", "string_type", "dict_type", "list_type"})


def _problem(err: Mapping[str, Any]) -> str:
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str):
        close = difflib.get_close_matches(loc[-1], field_names_at(loc), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"{_location(loc)}: unknown field{hint}"
    if err["type"] in _TYPE_ERRORS:  # strict: say what was given, since nothing was converted
        return f"{_location(loc)}: {err['msg']}, got {json.dumps(err.get('input'), default=str)}"
    return f"{_location(loc)}: {str(err['msg']).removeprefix('Value error, ')}"


def _validate(raw: Mapping[str, Any]) -> AscendInferenceServiceSpec:
    """The spec as the API server reads it: JSON, strictly typed.

    Strict JSON validation converts nothing the CRD's types refuse: `"128"` is no integer, `true` no
    integer or number, `1` no string; an integer is a number (JSON has one number type, and so has the
    API server's `number`). A YAML date or a non-string map key becomes a string, as kubectl sends it.
    """
    try:
        text = json.dumps(dict(raw), default=str, allow_nan=False)
    except ValueError as exc:  # NaN or infinity: no JSON number, refused by the API server too
        raise SpecError([f"spec: {exc}"]) from None
    return AscendInferenceServiceSpec.model_validate_json(text, strict=True)


def parse_spec(raw: Mapping[str, Any]) -> AscendInferenceServiceSpec:
    """Validate a spec mapping (camelCase keys) into the model."""
    try:
        return _validate(raw)
    except ValidationError as exc:
        raise SpecError([_problem(err) for err in exc.errors()]) from None


def salvage_spec(raw: Mapping[str, Any]) -> AscendInferenceServiceSpec | None:
    """The spec with every field that fails the schema removed (its default applies), or None when that
    still does not parse (a required field is missing or wrong). Lets the cross-field rules run on the rest
    of a spec that has schema errors, so a user sees every problem at once."""
    body = copy.deepcopy(dict(raw))
    try:
        _validate(body)
        return None  # nothing to salvage: it parses
    except ValidationError as exc:
        for err in exc.errors():
            _drop(body, tuple(err["loc"]))
    except SpecError:
        return None
    try:
        return _validate(body)
    except (ValidationError, SpecError):
        return None


def _drop(body: Any, loc: tuple[int | str, ...]) -> None:
    node = body
    for part in loc[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(node, dict) and loc and loc[-1] in node:
        del node[loc[-1]]


def name_problem(name: object) -> str | None:
    """Why metadata.name cannot name a service, or None."""
    if not name:
        return "metadata.name: required"
    if not isinstance(name, str) or len(name) > NAME_MAX or not NAME.match(name):
        return f"metadata.name: {name!r} {NAME_RULE}"
    return None


def parse_resource(body: Mapping[str, Any], *, default_namespace: str = "default") -> ParsedService:
    """Validate a whole AscendInferenceService object."""
    if body.get("kind") != KIND or body.get("apiVersion") != API_VERSION:
        raise SpecError([f"expected apiVersion {API_VERSION} kind {KIND}, got {body.get('apiVersion')} "
                         f"{body.get('kind')}"])  # fmt: skip
    meta = body.get("metadata") or {}
    name = meta.get("name")
    bad_name = name_problem(name)
    if bad_name is not None:
        raise SpecError([bad_name])
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
