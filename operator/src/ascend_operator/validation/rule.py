"""The shape of a cross-field rule, in a module of its own so that rule families in other modules
(validation/pd_rules.py) and the catalogue in validation/rules.py share it without importing each other."""

from collections.abc import Callable
from dataclasses import dataclass

from ascend_operator.api.spec import AscendInferenceServiceSpec

Spec = AscendInferenceServiceSpec


@dataclass(frozen=True, kw_only=True)
class SpecRule:
    """A cross-field rule with its reason, CEL twin (optional) and Python check."""

    name: str
    field: str
    message: str
    check: Callable[[Spec], bool]
    """True when the spec satisfies the rule."""
    cel: str | None = None
    """CEL expression over `self` at `cel_scope`."""
    cel_scope: tuple[str, ...] = ()
    """Path of the schema node under spec (camelCase) the CEL rule sits on."""
    cel_field_path: str | None = None
    """`fieldPath` relative to the scope, so the API server's error names the field."""
    detail: Callable[[Spec], str] | None = None
    """What exactly offends (e.g. the flag), appended to the message of a failed check."""
