"""A finding: one validation result, naming the field, the rule, and why."""

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    """How a finding affects the service: errors block it, warnings and notes are reported."""

    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True, kw_only=True)
class SpecFinding:
    """One validation result."""

    severity: Severity
    field: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.field}: {self.message} [{self.rule}]"


def errors(findings: list[SpecFinding]) -> list[SpecFinding]:
    """The findings that block the service."""
    return [f for f in findings if f.severity is Severity.ERROR]
