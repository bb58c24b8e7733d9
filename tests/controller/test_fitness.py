"""Node fitness: spec.runtime's minimum driver version and chip become node affinity over the device plugin's
labels, and a Pending pod that no node can take says which requirement fails and what the nodes have.

What a user notices: an engine never lands on a node with an older driver or another chip; a cluster whose
nodes gain a newer driver does not restart running engines (the versions are the cluster's, not the
spec's); a changed minimum does; and "didn't match Pod's node affinity" is explained in the status.
"""

from dataclasses import replace
from typing import Any

import pytest

from ascend_operator.api.parse import ParsedService, parse_resource
from ascend_operator.controller.reconcile import Context, reconcile
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.render.fitness import (
    CHIP_LABEL,
    DRIVER_LABEL,
    NO_VERSION,
    NodeFacts,
    allowed_versions,
    meets,
    unfit,
    with_fitness,
)
from ascend_operator.render.pod import Owner, build_pod, spec_hash
from tests.fixtures.kube import FakeKube

OWNER = Owner(name="dsv4-flash", namespace="llm", uid="u")
NODES = [
    NodeFacts("atlas-0", "23.0.6", "910B3"),
    NodeFacts("atlas-1", "24.1.rc2", "910B3"),
    NodeFacts("atlas-2", "25.5.1", "910B3"),
    NodeFacts("atlas-3", "25.5.1", "910B4"),
]


@pytest.mark.parametrize(
    ("version", "minimum", "ok"),
    [
        ("24.1.rc2", "24.1.rc2", True),
        ("24.1.0", "24.1.rc2", True),  # a release is newer than its rc
        ("24.1.rc1", "24.1.rc2", False),
        ("24.1.rc3", "24.1.0", False),
        ("25.5.1", "24.1.rc2", True),
        ("23.0.6", "24.1.rc2", False),
        ("24.1.10", "24.1.9", True),  # numbers, not strings
        ("garbage", "24.1.0", False),
        # the forms the plugin's label takes (its raw dcmi_get_dcmi_version string: server/manager.go:304-306)
        ("26.0.RC1", "26.0.rc1", True),  # upper-case rc
        ("26.0.RC1", "26.0.0", False),
        ("24.1.rc3.b060", "24.1.rc3", True),  # a build of rc3
        ("24.1.rc3", "24.1.rc3.b060", False),
        ("24.1.rc3.b060", "24.1.rc3.b061", False),
        ("24.1.rc3.b060", "24.1.0", False),  # still an rc
        ("24.1.b060", "24.1.0", False),  # a build needs a version before it: 24.1.b060 is not one
    ],
)
def test_driver_versions_compare_as_versions(version: str, minimum: str, ok: bool) -> None:
    assert meets(version, minimum) is ok


def runtime(example: ParsedService, **fields: Any) -> ParsedService:
    spec = example.spec.model_copy(update={"runtime": example.spec.runtime.model_copy(update=fields)})
    return replace(example, spec=spec)


def expressions(pod: dict[str, Any]) -> list[list[dict[str, Any]]]:
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [t["matchExpressions"] for t in terms["nodeSelectorTerms"]]


def test_the_minimum_and_chip_become_affinity_over_the_plugins_labels(example: ParsedService) -> None:
    parsed = runtime(example, min_driver_version="24.1.rc2", chip_name="910B3")
    versions = allowed_versions(parsed.spec, NODES)
    assert versions == ("24.1.rc2", "25.5.1")
    pod = build_pod(parsed.spec, owner=OWNER, replica=0, driver_versions=versions)
    assert expressions(pod) == [
        [
            {"key": CHIP_LABEL, "operator": "In", "values": ["910B3"]},
            {"key": DRIVER_LABEL, "operator": "In", "values": ["24.1.rc2", "25.5.1"]},
        ]
    ]
    assert "affinity" not in build_pod(example.spec, owner=OWNER, replica=0)["spec"]


def test_no_node_meeting_the_minimum_keeps_the_pod_pending_rather_than_misplaced(example: ParsedService) -> None:
    parsed = runtime(example, min_driver_version="26.0.0")
    pod = build_pod(parsed.spec, owner=OWNER, replica=0, driver_versions=allowed_versions(parsed.spec, NODES))
    assert expressions(pod) == [[{"key": DRIVER_LABEL, "operator": "In", "values": [NO_VERSION]}]]
    assert unfit(parsed.spec, NODES) == (
        "no node meets the placement requirements: huawei.com/driver.version >= 26.0.0; nodes have (chip/driver): "
        "910B3/23.0.6, 910B3/24.1.rc2, 910B3/25.5.1, 910B4/25.5.1"
    )
    both = runtime(example, min_driver_version="25.0.0", chip_name="910B3")
    assert unfit(both.spec, NODES) is None  # atlas-2 has both
    other = runtime(example, min_driver_version="25.6.0", chip_name="910B4")
    message = unfit(other.spec, NODES)
    assert message is not None
    assert message.startswith("no node meets the placement requirements: node.kubernetes.io/npu.chip.name=910B4 and ")


def test_the_users_own_affinity_is_kept_and_every_term_gets_the_requirements() -> None:
    mine: dict[str, Any] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}],
        },
        "podAntiAffinity": {"x": 1},
    }
    chip = [{"key": CHIP_LABEL, "operator": "In", "values": ["910B3"]}]
    merged = with_fitness(mine, chip)
    assert merged is not None
    terms = merged["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"][-1] for t in terms] == chip * 2
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["a"], ["b"]]
    assert merged["podAntiAffinity"] == {"x": 1}
    assert merged["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {"weight": 1, "preference": {}}
    ]
    assert mine["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0] == {
        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]
    }  # the spec's own dict is not changed


def test_a_newer_driver_in_the_cluster_restarts_nothing_but_a_changed_minimum_does(example: ParsedService) -> None:
    parsed = runtime(example, min_driver_version="24.1.rc2")
    assert spec_hash(parsed.spec) != spec_hash(example.spec)
    assert spec_hash(runtime(example, min_driver_version="25.0.0").spec) != spec_hash(parsed.spec)
    now = build_pod(parsed.spec, owner=OWNER, replica=0, driver_versions=("24.1.rc2",))
    later = build_pod(parsed.spec, owner=OWNER, replica=0, driver_versions=("24.1.rc2", "26.0.1"))
    key = "inference.ascend.dev/spec-hash"
    assert now["metadata"]["annotations"][key] == later["metadata"]["annotations"][key]


async def test_a_pending_pod_says_which_requirement_no_node_meets(example_body: dict[str, Any]) -> None:
    example_body["metadata"].update({"namespace": "llm", "uid": "u", "generation": 1})
    example_body["spec"]["runtime"] = {**example_body["spec"].get("runtime", {}), "minDriverVersion": "26.0.0"}
    kube = FakeKube()
    ctx = Context(kube=kube, events=lambda *_: None, now=lambda: "2026-12-01T00:00:00Z", nodes=lambda: NODES)
    await reconcile(example_body, ctx, ServiceMemory())
    (pod,) = kube.of_kind("Pod", "llm")
    assert expressions(pod) == [[{"key": DRIVER_LABEL, "operator": "In", "values": [NO_VERSION]}]]
    scheduler = "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."
    pod["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": scheduler}
    ]}  # fmt: skip
    status = await reconcile(example_body, ctx, ServiceMemory())
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert "no node meets the placement requirements: huawei.com/driver.version >= 26.0.0" in ready["message"], ready
    assert scheduler in ready["message"]
    without = Context(kube=FakeKube(), events=lambda *_: None, now=lambda: "2026-12-01T00:00:00Z")
    body = {**example_body, "metadata": {**example_body["metadata"]}}
    await reconcile(body, without, ServiceMemory())
    (alone,) = without.kube.of_kind("Pod", "llm")  # type: ignore[attr-defined]
    alone["status"] = pod["status"]
    status = await reconcile(body, without, ServiceMemory())
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert "needs the operator to read the nodes' driver versions (aisctl operator --npu-faults" in ready["message"]


def test_the_example_still_parses_with_the_fields(example_body: dict[str, Any]) -> None:
    example_body["spec"]["runtime"] = {"minDriverVersion": "24.1.rc2", "chipName": "910B3"}
    parsed = parse_resource(example_body)
    assert (parsed.spec.runtime.min_driver_version, parsed.spec.runtime.chip_name) == ("24.1.rc2", "910B3")


def test_a_staged_model_places_engines_only_where_the_role_put_that_copy(example_body: dict[str, Any]) -> None:
    """spec.model.source.hostPath.staged: the model_stage role's node label, and a Pending pod that says no
    node holds that copy (a node holding another manifest of the same model does not count)."""
    example_body["spec"]["model"]["source"] = {
        "hostPath": {"path": "/data/models", "staged": {"name": "dsv4-flash", "manifestDigest": "0123456789abcdef"}}
    }
    parsed = parse_resource(example_body)
    label = "inference.ascend.dev/model-dsv4-flash"
    pod = build_pod(parsed.spec, owner=OWNER, replica=0)
    assert expressions(pod) == [[{"key": label, "operator": "In", "values": ["0123456789abcdef"]}]]
    stale = [NodeFacts("atlas-0", "25.5.1", "910B3", {label: "fedcba9876543210"})]
    assert unfit(parsed.spec, stale) == (
        "no node meets the placement requirements: the staged model "
        "inference.ascend.dev/model-dsv4-flash=0123456789abcdef (playbooks/stage-model.yml); "
        "nodes have (chip/driver): 910B3/25.5.1"
    )
    holding = [*stale, NodeFacts("atlas-1", "25.5.1", "910B3", {label: "0123456789abcdef"})]
    assert unfit(parsed.spec, holding) is None


async def test_a_node_mindcluster_took_out_is_kept_off_new_pods_without_restarting_any(
    example_body: dict[str, Any],
) -> None:
    """NodeD's UnHealthy leaves the node's NPUs allocatable (only the device plugin's own chip faults leave
    it), so a new engine pod excludes that node by name, and while it is Pending its status says which node it
    is kept off and why; the exclusion is the cluster's, not the spec's: no running engine restarts for it."""
    example_body["metadata"].update({"namespace": "llm", "uid": "u", "generation": 1})
    out = {"atlas-0": "NodeD reports node atlas-0 UnHealthy"}
    kube = FakeKube()
    ctx = Context(kube=kube, events=lambda *_: None, now=lambda: "2026-12-01T00:00:00Z", unhealthy_nodes=lambda: out)
    await reconcile(example_body, ctx, ServiceMemory())
    (pod,) = kube.of_kind("Pod", "llm")
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["atlas-0"]}]}
    ]
    parsed = parse_resource(example_body)
    key = "inference.ascend.dev/spec-hash"
    assert pod["metadata"]["annotations"][key] == spec_hash(parsed.spec)
    scheduler = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    pod["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": scheduler}
    ]}  # fmt: skip
    status = await reconcile(example_body, ctx, ServiceMemory())
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (
        "kept off node(s) atlas-0 (NodeD reports node atlas-0 UnHealthy): waiting for free NPUs on another node"
        in ready["message"]
    ), ready
    assert scheduler in ready["message"]


def test_the_fence_joins_the_users_terms_and_the_requirements() -> None:
    mine = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["atlas-9"]}]}
    ]}}}  # fmt: skip
    chip = [{"key": CHIP_LABEL, "operator": "In", "values": ["910B3"]}]
    merged = with_fitness(mine, chip, avoid_nodes=["atlas-1", "atlas-0", "atlas-1"])
    assert merged is not None
    (term,) = merged["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == {
        "matchFields": [
            {"key": "metadata.name", "operator": "NotIn", "values": ["atlas-9"]},
            # one node per requirement: the API server refuses a field selector's NotIn of two values
            {"key": "metadata.name", "operator": "NotIn", "values": ["atlas-0"]},
            {"key": "metadata.name", "operator": "NotIn", "values": ["atlas-1"]},
        ],
        "matchExpressions": chip,
    }
    assert with_fitness(None, [], avoid_nodes=[]) is None
