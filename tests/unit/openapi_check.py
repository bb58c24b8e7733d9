"""The API server's structural-schema checks of a custom resource, offline, for tests.

Why: `aisctl render` must refuse what `kubectl apply` refuses; a test comparing the models with the CRD
needs the CRD's side without a cluster. This applies the generated openAPIV3Schema the way the API server
does before CEL: defaults first (an absent field with `default`, recursively into defaulted objects), then
type, enum, pattern, length, range, item and property counts, required fields, list-map keys, and unknown
fields refused (kubectl apply's strict field validation) unless `x-kubernetes-preserve-unknown-fields`.
CEL rules (x-kubernetes-validations) are not evaluated here; tests/e2e covers them against a real server.
"""

import copy
import re
from functools import cache
from typing import Any

Schema = dict[str, Any]


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    # RE2 (the API server's engine): `$` is end of text, never before a trailing newline as in Python
    return re.compile(re.sub(r"(?<!\\)\$", r"\\Z", pattern))


def with_defaults(schema: Schema, value: Any) -> Any:
    """`value` with the schema's defaults applied, as the API server does on decoding."""
    if isinstance(value, dict):
        out = dict(value)
        for name, child in schema.get("properties", {}).items():
            if name not in out and "default" in child:
                out[name] = copy.deepcopy(child["default"])
            if name in out:
                out[name] = with_defaults(child, out[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name in set(out) - set(schema.get("properties", {})):
                out[name] = with_defaults(extra, out[name])
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [with_defaults(schema["items"], item) for item in value]
    return value


def _type_ok(kind: str | None, value: Any) -> bool:
    match kind:
        case "object":
            return isinstance(value, dict)
        case "array":
            return isinstance(value, list)
        case "string":
            return isinstance(value, str)
        case "boolean":
            return isinstance(value, bool)
        case "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        case "number":
            return isinstance(value, int | float) and not isinstance(value, bool)
        case _:
            return True


def errors(schema: Schema, value: Any, path: str = "spec") -> list[str]:
    """Why the API server refuses `value` (already defaulted) under `schema`; empty when it accepts."""
    if value is None:
        return [] if schema.get("nullable") else [f"{path}: null"]
    if not _type_ok(schema.get("type"), value):
        return [f"{path}: must be of type {schema.get('type')}"]
    out: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: not one of {schema['enum']}")
    if isinstance(value, str):
        out += _string(schema, value, path)
    if isinstance(value, int | float) and not isinstance(value, bool):
        out += _number(schema, value, path)
    if isinstance(value, list):
        out += _array(schema, value, path)
    if isinstance(value, dict):
        out += _object(schema, value, path)
    return out


def _string(schema: Schema, value: str, path: str) -> list[str]:
    out = []
    if "pattern" in schema and not _regex(schema["pattern"]).search(value):
        out.append(f"{path}: should match {schema['pattern']!r}")
    if len(value) > schema.get("maxLength", len(value)) or len(value) < schema.get("minLength", 0):
        out.append(f"{path}: length")
    return out


def _number(schema: Schema, value: float, path: str) -> list[str]:
    out = []
    if "minimum" in schema:
        low = schema["minimum"]
        if value < low or (schema.get("exclusiveMinimum") is True and value == low):
            out.append(f"{path}: below {low}")
    if "maximum" in schema:
        high = schema["maximum"]
        if value > high or (schema.get("exclusiveMaximum") is True and value == high):
            out.append(f"{path}: above {high}")
    return out


def _array(schema: Schema, value: list[Any], path: str) -> list[str]:
    out = []
    if len(value) > schema.get("maxItems", len(value)) or len(value) < schema.get("minItems", 0):
        out.append(f"{path}: item count")
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            out += errors(items, item, f"{path}[{i}]")
    keys = schema.get("x-kubernetes-list-map-keys")
    if schema.get("x-kubernetes-list-type") == "map" and keys and all(isinstance(v, dict) for v in value):
        seen = [repr(tuple(v.get(k) for k in keys)) for v in value]
        if len(set(seen)) != len(seen):
            out.append(f"{path}: duplicate entries by {keys}")
    return out


def _object(schema: Schema, value: dict[str, Any], path: str) -> list[str]:
    out = []
    if len(value) > schema.get("maxProperties", len(value)) or len(value) < schema.get("minProperties", 0):
        out.append(f"{path}: property count")
    props: dict[str, Schema] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    for name, child in value.items():
        if name in props:
            out += errors(props[name], child, f"{path}.{name}")
        elif isinstance(extra, dict):
            out += errors(extra, child, f"{path}.{name}")
        elif not schema.get("x-kubernetes-preserve-unknown-fields"):
            out.append(f"{path}.{name}: unknown field")
    out += [f"{path}.{name}: required" for name in schema.get("required", []) if name not in value]
    return out
