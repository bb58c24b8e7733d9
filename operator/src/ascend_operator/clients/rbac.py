"""The chart's RBAC rules for the kinds of the table (clients/resources.py), generated: `make crd` writes
them to the chart's templates/_owned-rules.tpl and tests/helm/test_rbac.py fails when the file drifts.

Why generated: the rules were written by hand beside the table and then tested against it, so a new kind
was a row, a rule, a comment and a test expectation in four files. Now the row says what the operator does
(`verbs`), what kopf and the watch caches do for it (`kopf`, `cached`), why (`why`, the rule's comment) and
under which chart value (`gate`, `verb_gates`); this module only writes that down in the chart's syntax.
What is not a kind of the table stays hand-written in rbac.yaml: kopf's CRD, namespace and peering reads,
and the Secrets rule, whose names come from the chart's values (`templated` rows).
"""

import pathlib
import sys
import textwrap
from collections.abc import Iterator
from typing import Any, NamedTuple

from ascend_operator.clients.resources import RESOURCES, VERB_ORDER, Resource

HEADER = """\
{{- /*
GENERATED from operator/src/ascend_operator/clients/resources.py by `make crd` (clients/rbac.py): do not
edit. One rule per kind the operator touches, its comment the row's `why`, gated by the row's chart value.
rbac.yaml includes it in every Role or ClusterRole of the operator's namespaced rules.
*/ -}}
{{- define "ais.ownedRules" }}
"""


class Grant(NamedTuple):
    """One RBAC rule a row asks for, and the chart values it needs (all of them on)."""

    gates: tuple[str, ...]
    group: str
    resource: str
    verbs: frozenset[str]
    why: str

    def rule(self) -> dict[str, Any]:
        """The rule as the API server stores it, verbs in the chart's order."""
        ordered = [v for v in VERB_ORDER if v in self.verbs]
        return {"apiGroups": [self.group], "resources": [self.resource], "verbs": ordered}


def _grants(res: Resource) -> list[Grant]:
    """The rules of one row: its verbs, its status subresource, then each verb gated by a chart value."""
    base = (res.gate,) if res.gate else ()
    gated = {verb for verb, _ in res.verb_gates}
    found = [Grant(base, res.group, res.plural, res.rbac_verbs() - gated, res.why)]
    if status := res.rbac_verbs(status=True):
        why = f"{res.kind} status (the status subresource)."
        found.append(Grant(base, res.group, f"{res.plural}/status", status, why))
    for verb, gate in res.verb_gates:
        why = f"{res.kind} {verb}: only with {gate}."
        found.append(Grant((*base, gate), res.group, res.plural, frozenset({verb}), why))
    return found


def granted(*on: str) -> list[dict[str, Any]]:
    """The rules of every row the chart writes, in the table's order, with these chart values on: what the
    template renders to (tests/helm/test_rbac.py holds the chart to it)."""
    return [
        g.rule() for res in RESOURCES if not res.templated for g in _grants(res) if all(gate in on for gate in g.gates)
    ]


def _lines(grant: Grant) -> list[str]:
    comment = textwrap.wrap(grant.why, width=104, initial_indent="  # ", subsequent_indent="  # ")
    verbs = ", ".join(f'"{v}"' for v in grant.rule()["verbs"])
    return [
        *comment,
        f'  - apiGroups: ["{grant.group}"]',
        f'    resources: ["{grant.resource}"]',
        f"    verbs: [{verbs}]",
    ]


def _gated(gates: tuple[str, ...], lines: list[str]) -> list[str]:
    for gate in reversed(gates):
        lines = [f"  {{{{- if .Values.{gate} }}}}", *lines, "  {{- end }}"]
    return lines


def _rules(res: Resource) -> Iterator[str]:
    base = (res.gate,) if res.gate else ()
    body = [line for g in _grants(res) for line in _gated(g.gates[len(base) :], _lines(g))]
    yield from _gated(base, body)


def owned_rules() -> str:
    """The chart template defining `ais.ownedRules`."""
    lines = [line for res in RESOURCES if not res.templated for line in _rules(res)]
    return HEADER + "\n".join(lines) + "\n{{- end }}\n"


#: The chart README's table of these rules lies between these two lines (rewritten by `make crd`).
README_BEGIN = "<!-- owned-rules: generated from clients/resources.py by `make crd` -->"
README_END = "<!-- /owned-rules -->"


def readme_table() -> str:
    """The chart README's table of the rules above, one line per kind, with its chart value."""
    lines = ["| API group | Resource | Verbs | Only with | What for |", "|---|---|---|---|---|"]
    for res in RESOURCES:
        if res.templated:
            continue
        verbs = ", ".join(v for v in VERB_ORDER if v in res.rbac_verbs())
        if res.rbac_verbs(status=True):
            verbs += "; status: patch"
        gates = [res.gate] if res.gate else []
        gates += [f"{verb}: {gate}" for verb, gate in res.verb_gates]
        only = ", ".join(f"`{g}`" for g in gates) or "always"
        lines.append(f'| `"{res.group}"` | `{res.plural}` | {verbs} | {only} | {res.why} |')
    return "\n".join(lines)


def with_readme_table(readme: str) -> str:
    """`readme` with its generated table replaced by the current one."""
    head, rest = readme.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    return f"{head}{README_BEGIN}\n{readme_table()}\n{README_END}{tail}"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--readme":
        readme_path = pathlib.Path(sys.argv[2])
        readme_path.write_text(with_readme_table(readme_path.read_text()))
    else:
        print(owned_rules(), end="")
