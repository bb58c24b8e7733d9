"""Issue 15 end to end: a two-node service on LeaderWorkerSet, judged through its leader, rolled as one.

Runs on the session's local control plane with the LWS controller that hack/build-k8s.sh builds and
`hack/local-cluster lws` starts (webhooks on 127.0.0.1); on another cluster (kind) LWS must already be
installed, else the module is skipped. Two fake Atlas nodes with 8 NPUs each: the leader and the worker
cannot share one, so the scheduler places them apart.
"""

from __future__ import annotations

import datetime
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from harness.cluster import ROOT, Cluster, WaitTimeout, wait_for
from tests.e2e.operator_fixtures import (
    FAST,
    AddNodes,
    Proc,
    ais,
    background_requests,
    events,
    label_nodes,
    post,
    ready,
)

EXAMPLE = ROOT / "examples" / "dsr1-2node.yaml"

pytestmark = pytest.mark.usefixtures("delete_services_first")


def two_node(name: str, node_label: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"]["name"] = name
    body["spec"]["scheduling"]["nodeSelector"] = {"ais-e2e": node_label}
    body["spec"]["health"] = FAST
    return body


def group_pods(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.get_json(
        "pods", "-n", namespace, "-l", "leaderworkerset.sigs.k8s.io/name=svc-group"
    )["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def by_role(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {"leader" if p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0" else "worker": p
            for p in pods}  # fmt: skip


def hang_worker_and_wait_for_the_roll(cluster: Cluster, namespace: str, worker: dict[str, Any]) -> dict[str, Any]:
    """Hang the worker's engine (a lost HCCL peer) and return the service's lastRoll once there is one."""
    post(f"http://{worker['status']['podIP']}:8000", "/sim/faults", {"fault": "hang"})
    try:
        roll: dict[str, Any] = wait_for(
            lambda: ais(cluster, namespace, "svc")["status"].get("lastRoll"), timeout=120, message="roll"
        )
    except WaitTimeout as exc:
        raise AssertionError(f"{exc}; status: {json.dumps(ais(cluster, namespace, 'svc')['status'])}") from exc
    return roll


def wait_for_the_whole_group_recreated(
    cluster: Cluster, namespace: str, leader: dict[str, Any], worker: dict[str, Any]
) -> None:
    old = {leader["metadata"]["uid"], worker["metadata"]["uid"]}
    wait_for(
        lambda: len(new := group_pods(cluster, namespace)) == 2 and not old & {p["metadata"]["uid"] for p in new},
        timeout=120,
        message="the whole group recreated",
    )


def test_two_node_group_serves_through_its_leader_and_rolls_as_one(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, lws: None, attach: Callable[..., Proc]
) -> None:
    attach()
    label_nodes(cluster, add_nodes(2), namespace)
    cluster.apply(two_node("svc", namespace), namespace=namespace)
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=180, message="Ready through the leader's canary")

    sets = cluster.get_json("leaderworkersets", "-n", namespace)["items"]
    assert [s["metadata"]["name"] for s in sets] == ["svc-group"]
    assert sets[0]["spec"]["leaderWorkerTemplate"]["size"] == 2
    roles = by_role(group_pods(cluster, namespace))
    leader, worker = roles["leader"], roles["worker"]
    assert leader["spec"]["nodeName"] != worker["spec"]["nodeName"]
    for pod in (leader, worker):
        assert pod["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend910"] == "8"
    assert "--headless" in worker["spec"]["containers"][0]["args"]
    group = {"index": 0, "leader": "svc-group-0", "ready": True, "pods": "2/2",
             "nodes": [leader["spec"]["nodeName"], worker["spec"]["nodeName"]]}  # fmt: skip
    wait_for(lambda: ais(cluster, namespace, "svc")["status"].get("groups") == [group], timeout=30, message="groups")
    gate = {c["type"]: c for c in leader["status"]["conditions"]}["inference.ascend.dev/engine-ready"]
    assert (gate["status"], gate["reason"]) == ("True", "CanaryPassing")
    # the headless worker serves no API: the Service selects the leader only (Endpoints themselves refuse
    # the 127.x pod IPs of the local cluster, so the selector is what is checked)
    selector = cluster.get_json("service", "svc", "-n", namespace)["spec"]["selector"]
    chosen = cluster.get_json("pods", "-n", namespace, "-l", ",".join(f"{k}={v}" for k, v in selector.items()))
    assert [p["metadata"]["name"] for p in chosen["items"]] == [leader["metadata"]["name"]]
    # the scale subresource an HPA reads counts one pod per group: the leader (replicas counts groups)
    path = f"/apis/inference.ascend.dev/v1alpha1/namespaces/{namespace}/ascendinferenceservices/svc/scale"
    scale = json.loads(cluster.kubectl("get", "--raw", path))
    counted = cluster.get_json("pods", "-n", namespace, "-l", scale["status"]["selector"])["items"]
    assert [p["metadata"]["name"] for p in counted] == [leader["metadata"]["name"]]
    assert (scale["spec"]["replicas"], scale["status"]["replicas"]) == (1, 1)

    base = f"http://{leader['status']['podIP']}:8000"
    stop = threading.Event()
    body = {"model": "deepseek_r1", "prompt": "steady", "sim_prompt_tokens": 256, "max_tokens": 16000,
            "ignore_eos": True}  # fmt: skip
    background_requests(base, body, clients=4, stop=stop)
    try:
        roll = hang_worker_and_wait_for_the_roll(cluster, namespace, worker)
        assert roll["reason"] == "Stalled"
        assert roll["pod"] == leader["metadata"]["name"]
        wait_for_the_whole_group_recreated(cluster, namespace, leader, worker)
        stop.set()
        wait_for(lambda: ready(cluster, namespace, "svc"), timeout=180, message="Ready again")
        status = ais(cluster, namespace, "svc")["status"]
        assert len(status["rolls"]) == 1
        assert len(events(cluster, namespace, "Rolled")) == 1
    finally:
        stop.set()


def test_a_stalled_workers_ranks_roll_the_group_while_the_leaders_ranks_advance(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, lws: None, attach: Callable[..., Proc]
) -> None:
    # A dense model: DP ranks are independent engines (vllm/v1/engine/core.py:1193-1200), so a silent worker
    # stops only its own ranks while the leader's keep advancing.
    attach(AIS_SIM_DENSE="1")
    label_nodes(cluster, add_nodes(2), namespace)
    cluster.apply(two_node("svc", namespace), namespace=namespace)
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=180, message="Ready through the leader's canary")
    roles = by_role(group_pods(cluster, namespace))
    leader, worker = roles["leader"], roles["worker"]
    stop = threading.Event()
    body = {"model": "deepseek_r1", "prompt": "steady", "sim_prompt_tokens": 256, "max_tokens": 16000,
            "ignore_eos": True}  # fmt: skip
    background_requests(f"http://{leader['status']['podIP']}:8000", body, clients=8, stop=stop)
    try:
        roll = hang_worker_and_wait_for_the_roll(cluster, namespace, worker)
        # summed over the ranks the leader's progress hides it; judged per rank, the worker's ranks stall
        assert roll["reason"] == "Stalled"
        assert roll["message"].startswith("DP ranks 2, 3 of 4: "), roll
        assert "(the other 2 advance)" in roll["message"]
        wait_for_the_whole_group_recreated(cluster, namespace, leader, worker)
    finally:
        stop.set()


def test_a_switch_from_one_node_to_two_keeps_serving_and_drains_the_single_node_pod(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, lws: None, attach: Callable[..., Proc]
) -> None:
    """spec.parallelism.nodes 1 -> 2 on three nodes: the group starts on the two free nodes while the
    single-node pod serves, and the pod goes only once the group serves, drained (issue 28)."""
    attach()
    label_nodes(cluster, add_nodes(3), namespace)
    single = two_node("svc", namespace)
    single["spec"]["parallelism"].update({"nodes": 1, "data": 2})
    cluster.apply(single, namespace=namespace)
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=180, message="the single-node pod Ready")
    plain = cluster.get_json("pods", "-n", namespace, "-l", "inference.ascend.dev/replica=0")["items"]
    assert [p["metadata"]["name"] for p in plain] == ["svc-0"]

    cluster.apply(two_node("svc", namespace), namespace=namespace)

    def switched() -> dict[str, Any] | None:
        status = ais(cluster, namespace, "svc")["status"]
        done = status.get("groups") and status["groups"][0]["ready"] and status.get("rolls")
        return status if done and ready(cluster, namespace, "svc") else None

    status = wait_for(switched, timeout=240, message="the group serving and the single-node pod rolled")
    (roll,) = status["rolls"]
    assert (roll["pod"], roll["reason"], roll["drain"]) == ("svc-0", "TopologyChanged", "Completed")
    # the Service kept a serving pod: the group's leader was Ready before the single-node pod was drained
    leader = by_role(group_pods(cluster, namespace))["leader"]
    leader_ready = {c["type"]: c for c in leader["status"]["conditions"]}["Ready"]["lastTransitionTime"]
    drains = [when(e.get("lastTimestamp") or e["eventTime"]) for e in events(cluster, namespace, "Draining")]
    assert drains
    assert min(drains) >= when(leader_ready)


def when(stamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(stamp)
