"""Read AscendInferenceServices from a file the way kubectl does: every problem at once, each on one line
naming the file, the document and the field.

A user fixing a spec should not meet its errors one run at a time: a YAML syntax error, an invalid
`metadata.name`, schema errors (with "did you mean" for a misspelt field) and the cross-field rules are
all collected before `aisctl` exits 2. The cross-field rules run even when the schema fails, on the
spec with the failing fields removed (`salvage_spec`), so they are not hidden behind a typo.
"""

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ascend_operator.api.constants import API_VERSION, KIND
from ascend_operator.api.parse import ParsedService, SpecError, name_problem, parse_spec, salvage_spec
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.validation import Severity, SpecFinding, validate_spec

STDIN = "-"


@dataclass
class Loaded:
    """The services of a file and every line to report about it."""

    services: list[ParsedService] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """One line each: `<file>: document <n> (<name>): <field>: <message>`."""
    notices: list[str] = field(default_factory=list)
    """Warnings and notes, same form, prefixed with their severity."""


def _label(path: str) -> str:
    return "<stdin>" if path == STDIN else path


def _read(path: str) -> str:
    if path == STDIN:
        return sys.stdin.read()
    return Path(path).read_text(encoding="utf-8")


def _documents(text: str, where: str, out: Loaded) -> Iterator[tuple[int, Any]]:
    """(1-based index, document) for every non-empty document; a syntax error ends the stream."""
    index = 0
    try:
        for index, doc in enumerate(yaml.safe_load_all(text), start=1):
            if doc is not None:
                yield index, doc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        out.errors.append(f"{where}: document {index + 1}: invalid YAML: {at}{problem}")


def _finding_line(where: str, finding: SpecFinding) -> str:
    return f"{where}: {finding.field}: {finding.message} [{finding.rule}]"


def _check(doc: Mapping[str, Any], where: str, namespace: str | None, out: Loaded) -> None:
    """Every problem of one AscendInferenceService document; the service when it has none."""
    errors: list[str] = []
    if doc.get("apiVersion") != API_VERSION:
        errors.append(f"apiVersion: expected {API_VERSION}, got {doc.get('apiVersion')!r}")
    raw_meta = doc.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    name = meta.get("name")
    bad_name = name_problem(name)
    if bad_name is not None:
        errors.append(bad_name)
    own_ns = meta.get("namespace")
    if namespace is not None and own_ns and own_ns != namespace:
        errors.append(
            f"metadata.namespace: {own_ns!r} does not match --namespace {namespace!r}; pass --namespace={own_ns}"
        )
    where = f"{where} ({name})" if isinstance(name, str) and name else where
    raw = doc.get("spec")
    spec: AscendInferenceServiceSpec | None = None
    if not isinstance(raw, Mapping):
        errors.append("spec: required (a mapping)")
    else:
        try:
            spec = parse_spec(raw)
        except SpecError as exc:
            errors += exc.problems
        checked = spec if spec is not None else salvage_spec(raw)
        for finding in validate_spec(checked) if checked is not None else []:
            if finding.severity is Severity.ERROR:
                errors.append(f"{finding.field}: {finding.message} [{finding.rule}]")
            else:
                out.notices.append(f"{finding.severity}: {_finding_line(where, finding)}")
    out.errors += [f"{where}: {e}" for e in errors]
    if not errors and spec is not None:
        out.services.append(
            ParsedService(
                name=str(name),
                namespace=str(own_ns or namespace or "default"),
                uid=None,
                generation=None,
                spec=spec,
            )
        )


def load(path: str, *, namespace: str | None = None) -> Loaded:
    """Every AscendInferenceService in a YAML file ('-' for stdin), with every problem found."""
    out = Loaded()
    label = _label(path)
    try:
        text = _read(path)
    except FileNotFoundError:
        out.errors.append(f"{label}: No such file")
        return out
    except UnicodeDecodeError as exc:
        out.errors.append(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})")
        return out
    except OSError as exc:
        out.errors.append(f"{label}: {exc.strerror or exc}")
        return out
    found = 0
    for index, doc in _documents(text, label, out):
        where = f"{label}: document {index}"
        if not isinstance(doc, Mapping):
            out.errors.append(f"{where}: expected a Kubernetes object (a mapping), got {type(doc).__name__}")
            continue
        if doc.get("kind") != KIND:
            continue  # other objects in the same file (a PVC, a Secret) are not ours to check
        found += 1
        _check(doc, where, namespace, out)
    if not found and not out.errors:
        out.errors.append(f"{label}: no {KIND} in the file")
    return out
