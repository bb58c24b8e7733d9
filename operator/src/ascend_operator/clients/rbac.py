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

from ascend_operator.clients.resources import RESOURCES, VERB_ORDER, Resource

HEADER = """\
{{- /*
GENERATED from operator/src/ascend_operator/clients/resources.py by `make crd` (clients/rbac.py): do not
edit. One rule per kind the operator touches, its comment the row's `why`, gated by the row's chart value.
rbac.yaml includes it in every Role or ClusterRole of the operator's namespaced rules.
*/ -}}
{{- define "ais.ownedRules" }}
"""


def _rule(group: str, resource: str, verbs: frozenset[str], why: str) -> list[str]:
    comment = textwrap.wrap(why, width=104, initial_indent="  # ", subsequent_indent="  # ")
    ordered = ", ".join(f'"{v}"' for v in VERB_ORDER if v in verbs)
    return [*comment, f'  - apiGroups: ["{group}"]', f'    resources: ["{resource}"]', f"    verbs: [{ordered}]"]


def _gated(gate: str, lines: list[str]) -> list[str]:
    return [f"  {{{{- if .Values.{gate} }}}}", *lines, "  {{- end }}"] if gate else lines


def _rules(res: Resource) -> Iterator[str]:
    gated = {verb for verb, _ in res.verb_gates}
    body = _rule(res.group, res.plural, res.rbac_verbs() - gated, res.why)
    if status := res.rbac_verbs(status=True):
        body += _rule(res.group, f"{res.plural}/status", status, f"{res.kind} status (the status subresource).")
    for verb, gate in res.verb_gates:
        body += _gated(gate, _rule(res.group, res.plural, frozenset({verb}), f"{res.kind} {verb}: only with {gate}."))
    yield from _gated(res.gate, body)


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
