"""Whole-object tests of the multi-node rendering: the LeaderWorkerSet a two-node spec becomes.

The leader and worker templates are asserted as the single-node pod spec plus exactly the flags and env
vllm-ascend's multi-node tutorial adds (DeepSeek-R1.md section 5.2), so any other difference fails.
"""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from ascend_operator.api.parse import ParsedService, parse_resource
from ascend_operator.api.status import AscendInferenceServiceStatus
from ascend_operator.controller.groups import group_status
from ascend_operator.controller.status import merge_patch
from ascend_operator.controller.views import PodView, pod_view
from ascend_operator.render.lws import build_leader_worker_set, group_spec_hash
from ascend_operator.render.pod import Owner, build_pod_spec, build_service
from ascend_operator.validation import Severity, validate_spec

ROOT = Path(__file__).resolve().parents[2]
OWNER = Owner(name="dsr1", namespace="llm", uid="3f1c7f9e-0000-4000-8000-000000000002")
LABELS = {
    "app.kubernetes.io/name": "ascend-inference",
    "app.kubernetes.io/instance": "dsr1",
    "app.kubernetes.io/component": "engine",
    "app.kubernetes.io/managed-by": "ascend-inference-operator",
    "inference.ascend.dev/service": "dsr1",
}
NETWORK_ENV = [
    {"name": "HCCL_IF_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    {"name": "GLOO_SOCKET_IFNAME", "value": "eth0"},
    {"name": "TP_SOCKET_IFNAME", "value": "eth0"},
    {"name": "HCCL_SOCKET_IFNAME", "value": "eth0"},
]


@pytest.fixture
def two_node_body() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "dsr1-2node.yaml").read_text())
    return body


@pytest.fixture
def two_node(two_node_body: dict[str, Any]) -> ParsedService:
    return parse_resource(two_node_body)


def _insert_after(args: list[str], flag: str, extra: list[str]) -> list[str]:
    at = args.index(flag) + 2
    return [*args[:at], *extra, *args[at:]]


def test_two_node_example_is_one_leader_worker_set(two_node: ParsedService) -> None:
    spec = two_node.spec
    single = build_pod_spec(spec)
    engine = single["containers"][0]
    dp = ["--data-parallel-size-local", "2", "--data-parallel-address", "$(LWS_LEADER_ADDRESS)"]
    dp += ["--data-parallel-rpc-port", "13389"]
    leader = copy.deepcopy(single)
    leader["containers"][0]["args"] = _insert_after(engine["args"], "--data-parallel-size", dp)
    leader["containers"][0]["env"] = [*engine["env"], *NETWORK_ENV]
    worker = copy.deepcopy(leader)
    worker_args = _insert_after(engine["args"], "--data-parallel-size", [*dp, "--data-parallel-start-rank", "2"])
    worker["containers"][0]["args"] = _insert_after(worker_args, "--port", ["--headless"])
    for key in ("ports", "startupProbe", "readinessProbe"):
        del worker["containers"][0][key]
    del worker["readinessGates"]
    digest = group_spec_hash(spec)

    def template(role: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "metadata": {
                "labels": {**LABELS, "inference.ascend.dev/role": role},
                "annotations": {"inference.ascend.dev/spec-hash": digest},
            },
            "spec": pod_spec,
        }

    assert build_leader_worker_set(spec, owner=OWNER) == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": "dsr1-group",
            "namespace": "llm",
            "labels": LABELS,
            "annotations": {"inference.ascend.dev/spec-hash": digest},
            "ownerReferences": [
                {
                    "apiVersion": "inference.ascend.dev/v1alpha1",
                    "kind": "AscendInferenceService",
                    "name": "dsr1",
                    "uid": "3f1c7f9e-0000-4000-8000-000000000002",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0},
            },
            "leaderWorkerTemplate": {
                "size": 2,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": template("leader", leader),
                "workerTemplate": template("worker", worker),
            },
        },
    }
    # the tutorial's command lines: total DP 4, TP 4, expert parallel on both nodes
    assert leader["containers"][0]["args"][:3] == ["vllm", "serve", "/data/models/DeepSeek-R1-W8A8"]
    assert "command" not in leader["containers"][0]  # the image keeps its ENTRYPOINT
    assert "--headless" not in leader["containers"][0]["args"]
    assert engine["args"][engine["args"].index("--data-parallel-size") + 1] == "4"
    assert worker["containers"][0]["resources"]["limits"]["huawei.com/Ascend910"] == "8"


def test_the_groups_roll_within_the_services_budget_and_never_surge(two_node_body: dict[str, Any]) -> None:
    """LWS's rolling update is a deletion too: it takes out no more groups than spec.rollout.maxUnavailable,
    and never a surge group, whose NPUs only the groups it replaces hold."""
    two_node_body["spec"]["replicas"] = 4
    two_node_body["spec"]["rollout"] = {"maxUnavailable": 2}
    lws = build_leader_worker_set(parse_resource(two_node_body).spec, owner=OWNER)
    assert lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {"maxUnavailable": 2, "maxSurge": 0}


def test_multi_node_service_selects_only_leaders(two_node: ParsedService) -> None:
    assert build_service(two_node.spec, owner=OWNER)["spec"]["selector"] == {
        "inference.ascend.dev/service": "dsr1",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }


def test_one_engine_per_node_workers_take_their_lws_index_as_start_rank(two_node_body: dict[str, Any]) -> None:
    two_node_body["spec"]["parallelism"].update({"nodes": 4, "data": 4, "tensor": 8})
    lws = build_leader_worker_set(parse_resource(two_node_body).spec, owner=OWNER)
    args = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["args"]
    assert args[args.index("--data-parallel-start-rank") + 1] == "$(LWS_WORKER_INDEX)"
    assert args[args.index("--data-parallel-size-local") + 1] == "1"


def test_spec_env_overrides_the_network_env(two_node_body: dict[str, Any]) -> None:
    two_node_body["spec"]["env"] = [{"name": "HCCL_SOCKET_IFNAME", "value": "enp189s0f0"}]
    lws = build_leader_worker_set(parse_resource(two_node_body).spec, owner=OWNER)
    env = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["env"]
    assert [e for e in env if e["name"] == "HCCL_SOCKET_IFNAME"] == [
        {"name": "HCCL_SOCKET_IFNAME", "value": "enp189s0f0"}
    ]


def _errors(body: dict[str, Any]) -> set[str]:
    return {f.rule for f in validate_spec(parse_resource(body).spec) if f.severity is Severity.ERROR}


@pytest.mark.parametrize(
    ("nodes", "data", "tensor", "broken"),
    [
        (2, 4, 4, set()),  # the tutorial: DP4 x TP4 on 2 x 8
        (2, 2, 8, set()),  # one TP8 engine per node
        (2, 2, 4, {"ParallelismMatchesNPUs"}),  # 8 NPUs used of 16
        (2, 3, 8, {"ParallelismMatchesNPUs", "DataParallelSplitsOverNodes"}),
        (2, 1, 16, {"DataParallelSplitsOverNodes"}),  # TP across nodes: not the tutorial's form
        (4, 8, 4, {"MultiNodeStartRank"}),  # 2 engines per node on 4 nodes: no single start rank
        (4, 4, 8, set()),
    ],
)
def test_multi_node_layout_rules(
    two_node_body: dict[str, Any], nodes: int, data: int, tensor: int, broken: set[str]
) -> None:
    two_node_body["spec"]["parallelism"].update({"nodes": nodes, "data": data, "tensor": tensor})
    rules = {"ParallelismMatchesNPUs", "DataParallelSplitsOverNodes", "MultiNodeStartRank"}
    assert _errors(two_node_body) & rules == broken


def test_two_node_budget_is_skipped_not_guessed(two_node_body: dict[str, Any]) -> None:
    two_node_body["spec"]["model"]["profile"] = "deepseek-v4-flash-w8a8"
    two_node_body["spec"]["parallelism"].update({"tensor": 8, "data": 2})
    notes = [f for f in validate_spec(parse_resource(two_node_body).spec) if f.rule == "HBMBudget"]
    assert [f.severity for f in notes] == [Severity.NOTE]
    assert "over 2 nodes: not checked" in notes[0].message


def _view(name: str, group: str, worker: str, *, node: str | None, ready: bool) -> PodView:
    return pod_view(
        {
            "metadata": {
                "name": name,
                "uid": name,
                "labels": {
                    "leaderworkerset.sigs.k8s.io/group-index": group,
                    "leaderworkerset.sigs.k8s.io/worker-index": worker,
                },
            },
            "spec": {"nodeName": node} if node else {},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]},
        }
    )


def test_group_status_shows_each_group_its_leader_and_missing_workers() -> None:
    pods = [
        _view("dsr1-group-0", "0", "0", node="atlas-a2-0", ready=True),
        _view("dsr1-group-0-1", "0", "1", node="atlas-a2-1", ready=True),
        _view("dsr1-group-1", "1", "0", node="atlas-a2-2", ready=False),  # its worker is Pending for NPUs
    ]
    written = merge_patch(AscendInferenceServiceStatus(groups=group_status(pods, size=2)))
    assert written["groups"] == [  # the status patch's entries, as before the models
        {"index": 0, "leader": "dsr1-group-0", "ready": True, "pods": "2/2", "nodes": ["atlas-a2-0", "atlas-a2-1"]},
        {"index": 1, "leader": "dsr1-group-1", "ready": False, "pods": "1/2", "nodes": ["atlas-a2-2"]},
    ]
