"""values.yaml, its schema and its documentation agree, and a typo fails the install.

Why it exists: an unknown key Helm ignores silently is the most common way a chart misleads its user
(`watchNamespace: [a]` would quietly install a cluster-wide operator). The schema forbids unknown keys
at every level; these tests prove Helm rejects them with a message naming the key, and that every
documented key is in the schema and the README.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.helm.chart import CHART, Helm, HelmError
from tests.helm.values_doc import README, VALUES, parse_values, replace_table, values_table

SCHEMA = json.loads((CHART / "values.schema.json").read_text())


@pytest.mark.parametrize(
    ("flag", "named"),
    [
        ("replicaCont=2", "replicaCont"),
        ("operator.watchNamespace={a}", "watchNamespace"),
        ("securityContext.privileged2=true", "privileged2"),
        ("metrics.serviceMonitor.intervall=5s", "intervall"),
    ],
)
def test_unknown_key_is_rejected_naming_the_key(helm: Helm, flag: str, named: str) -> None:
    with pytest.raises(HelmError) as err:
        helm.template(sets=[flag])
    message = err.value.stderr
    assert "schema" in message, message
    assert named in message, message
    assert "not allowed" in message, message


@pytest.mark.parametrize(
    "flag",
    [
        "replicaCount=-1",
        "replicaCount=two",
        "operator.watchNamespaces={Bad_NS}",
        "operator.logLevel=LOUD",
        "image.digest=latest",
        "operator.healthPort=80",
    ],
)
def test_invalid_value_is_rejected(helm: Helm, flag: str) -> None:
    with pytest.raises(HelmError, match="schema"):
        helm.template(sets=[flag])


def _object_nodes(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            found.append((path or "(root)", node))
        for key, child in node.items():
            found += _object_nodes(child, f"{path}/{key}")
    elif isinstance(node, list):
        for i, child in enumerate(node):
            found += _object_nodes(child, f"{path}[{i}]")
    return found


def test_every_object_with_declared_properties_forbids_others() -> None:
    nodes = _object_nodes(SCHEMA)
    assert len(nodes) > 20
    open_ones = [path for path, node in nodes if node.get("additionalProperties") is not False]
    # extraEnv items are Kubernetes EnvVars (value, valueFrom): only `name` is required here
    assert open_ones == ["/properties/operator/properties/extraEnv/items"]


def _schema_at(path: list[str]) -> dict[str, Any]:
    node: dict[str, Any] = SCHEMA
    for part in path:
        props = node.get("properties")
        node = props[part] if props and part in props else node["additionalProperties"]
    return node


def test_every_values_key_is_in_the_schema_and_documented() -> None:
    rows = parse_values(VALUES.read_text())
    assert len(rows) > 50
    undocumented = [row.path for row in rows if not row.description]
    assert not undocumented, f"values.yaml keys without a '# --' comment: {undocumented}"
    for row in rows:
        assert isinstance(_schema_at(row.path.split(".")), dict), row.path


def test_values_parser_reads_comments_nesting_and_defaults() -> None:
    text = "# header\n\n# -- top\n# more\na:\n  # -- inner\n  b: [1]\n# -- c\nc: x\nd: 1\n"
    rows = parse_values(text)
    assert [(r.path, r.default, r.description) for r in rows] == [
        ("a", {"b": [1]}, "top more"),
        ("a.b", [1], "inner"),
        ("c", "x", "c"),
        ("d", 1, ""),
    ]


def test_readme_values_table_is_generated_from_values_yaml() -> None:
    readme = README.read_text()
    table = values_table(parse_values(VALUES.read_text()))
    stale = "run `.venv/bin/python -m tests.helm.values_doc --write` to regenerate it"
    assert replace_table(readme, table) == readme, stale
    defaults = yaml.safe_load(VALUES.read_text())
    assert f"| `replicaCount` | int | `{defaults['replicaCount']}` |" in readme
