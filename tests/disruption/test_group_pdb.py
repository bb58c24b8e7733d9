"""A `kubectl drain` of every node of a multi-node service, against the eviction API's arithmetic: the group
budget (render/group_pdb.py) lets it take no more groups than spec.disruptionBudget allows out.

The eviction API allows an eviction while Ready pods - minAvailable > 0, and always for a pod that is not
Ready (unhealthyPodEvictionPolicy AlwaysAllow); LWS's RecreateGroupOnPodRestart makes every pod of a group
with an evicted member not Ready until the group is back.
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

from ascend_operator.api.parse import parse_resource
from ascend_operator.render.group_pdb import build_group_pdb
from ascend_operator.render.pod import Owner

OWNER = Owner(name="dsr1", namespace="llm", uid="u")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dsr1-2node.yaml"


def example_2n() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return body


def _spec(replicas: int, min_available: int, *, nodes_body: dict[str, Any]) -> Any:
    nodes_body["spec"]["replicas"] = replicas
    nodes_body["spec"]["disruptionBudget"] = {"minAvailable": min_available}
    return parse_resource(nodes_body).spec


def drain_everything(pdb: dict[str, Any], *, groups: int, size: int) -> int:
    """Evict every pod, node by node (pod i of every group on node i), while the budget allows; return
    how many groups went down."""
    down: set[int] = set()
    floor = pdb["spec"]["minAvailable"]
    for _node in range(size):
        for group in range(groups):
            ready = (groups - len(down)) * size
            if group in down or ready - floor > 0:
                down.add(group)  # the group is recreated: all its pods go not Ready
    return len(down)


@pytest.mark.parametrize(
    ("replicas", "min_available", "most_out"),
    [(1, 1, 0), (2, 1, 1), (4, 1, 3), (4, 3, 1), (3, 0, 3)],
)
def test_a_drain_takes_no_more_groups_than_the_budget_allows(replicas: int, min_available: int, most_out: int) -> None:
    body = example_2n()
    spec = _spec(replicas, min_available, nodes_body=body)
    pdb = build_group_pdb(spec, owner=OWNER)
    assert pdb is not None
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert pdb["spec"]["selector"] == {"matchLabels": {"inference.ascend.dev/service": "dsr1"}}
    out = drain_everything(pdb, groups=replicas, size=spec.parallelism.nodes)
    assert out <= most_out
    assert out >= min(1, most_out)  # and the budget is not a wall: a drain proceeds when groups may go


def test_single_node_and_disabled_budgets_are_not_group_budgets() -> None:
    body = example_2n()
    body["spec"]["disruptionBudget"] = {"enabled": False}
    assert build_group_pdb(parse_resource(body).spec, owner=OWNER) is None
