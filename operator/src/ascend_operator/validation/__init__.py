"""Validation beyond single-field constraints: cross-field rules and the HBM/KV budget.

Each rule returns findings (error, warning, note) that name the field and the rule; the CLI prints them,
the operator turns errors into a condition and an event. Rules with a CEL twin are also enforced by the
API server at `kubectl apply`.
"""

from ascend_operator.validation.findings import Severity, SpecFinding
from ascend_operator.validation.validate import validate_spec

__all__ = ["Severity", "SpecFinding", "validate_spec"]
