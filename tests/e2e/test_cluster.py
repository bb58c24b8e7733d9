"""Proves the e2e environment itself: real scheduler, garbage collector and kubelet-like pod lifecycle.

Why it exists: the operator's e2e tests lean on this behaviour (NPU capacity on fake Atlas nodes, the
scheduler's Insufficient message, readiness gates, cascading deletion, no process left behind). If
one of these broke, operator tests would fail for reasons that have nothing to do with the operator;
these tests say which part of the environment broke.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
from typing import Any

import pytest

from harness.cluster import (
    LOCAL_CLUSTER,
    Cluster,
    KubectlError,
    pid_running,
    start_local,
    stop_local,
    wait_for,
)

NPU = "huawei.com/Ascend910"
GATE = "inference.ascend.dev/engine-ready"
LOCAL_ONLY = pytest.mark.skipif(
    bool(os.environ.get("AIS_E2E_KUBECONFIG")), reason="checks the local control plane, not a given cluster"
)


def npu_pod(name: str, *, npus: int = 8, gates: tuple[str, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "engine",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"limits": {NPU: str(npus)}},
            }
        ],
        "terminationGracePeriodSeconds": 30,
    }
    if gates:
        spec["readinessGates"] = [{"conditionType": g} for g in gates]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def pod(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = cluster.get_json("pod", name, "-n", ns)
    return obj


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == ctype), None)


def running(cluster: Cluster, ns: str, name: str) -> dict[str, Any] | None:
    obj = pod(cluster, ns, name)
    return obj if obj["status"].get("phase") == "Running" else None


def npu_nodes(cluster: Cluster) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = cluster.get_json("nodes")["items"]
    return [n for n in nodes if n["status"].get("allocatable", {}).get(NPU)]


def test_nodes_advertise_eight_npus(cluster: Cluster) -> None:
    nodes = npu_nodes(cluster)
    assert len(nodes) == 1, "the suite assumes exactly one 8-NPU node at the start"
    status = nodes[0]["status"]
    assert status["capacity"][NPU] == "8"
    assert status["allocatable"][NPU] == "8"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"


@LOCAL_ONLY
def test_fake_atlas_node_looks_like_an_atlas_800_a2(cluster: Cluster) -> None:
    node = cluster.get_json("node", "atlas-a2-0")
    labels, status = node["metadata"]["labels"], node["status"]
    assert labels["accelerator"] == "huawei-Ascend910"
    assert labels["node.kubernetes.io/npu.chip.name"] == "910B4-1"
    assert labels["kubernetes.io/arch"] == "arm64"
    assert status["allocatable"]["cpu"] == "192"
    assert status["allocatable"]["memory"] == "502Gi"
    # KWOK renews the node's Lease like kubelet does, so node lifecycle keeps it Ready.
    lease = cluster.get_json("lease", "atlas-a2-0", "-n", "kube-node-lease")
    assert lease["spec"]["holderIdentity"]
    assert lease["spec"]["renewTime"]


def test_scheduler_binds_an_8_npu_pod_which_runs_and_deletes_gracefully(cluster: Cluster, namespace: str) -> None:
    body = npu_pod("engine-0")
    body["spec"]["terminationGracePeriodSeconds"] = 3600  # only the kubelet stand-in can end it within the wait
    cluster.apply(body, namespace=namespace)
    obj = wait_for(lambda: running(cluster, namespace, "engine-0"), timeout=60, message="engine-0 Running")
    assert obj["spec"]["nodeName"] in {n["metadata"]["name"] for n in npu_nodes(cluster)}
    scheduled = condition(obj, "PodScheduled")
    assert scheduled is not None
    assert scheduled["status"] == "True"
    ip = ipaddress.ip_address(obj["status"]["podIP"])
    if not os.environ.get("AIS_E2E_KUBECONFIG"):
        assert ip.is_loopback, f"pod IP {ip} must be in 127.0.0.0/8 on the local control plane"
    wait_for(
        lambda: (condition(pod(cluster, namespace, "engine-0"), "Ready") or {}).get("status") == "True",
        timeout=30,
        message="engine-0 Ready",
    )
    # Graceful deletion completes because kubelet/KWOK confirms it, not because the hour-long grace period ran
    # out: kubectl's wait fails (KubectlError) if the pod is still there when it gives up.
    cluster.kubectl("delete", "pod", "engine-0", "-n", namespace, "--wait=true", "--timeout=60s")
    left = cluster.get_json("pods", "-n", namespace)["items"]
    assert [p["metadata"]["name"] for p in left] == []


def test_second_8_npu_pod_stays_pending_with_the_schedulers_message(cluster: Cluster, namespace: str) -> None:
    cluster.apply(npu_pod("engine-0"), namespace=namespace)
    wait_for(lambda: running(cluster, namespace, "engine-0"), timeout=60, message="engine-0 Running")
    cluster.apply(npu_pod("engine-1"), namespace=namespace)

    def unschedulable() -> dict[str, Any] | None:
        cond = condition(pod(cluster, namespace, "engine-1"), "PodScheduled")
        return cond if cond and cond["status"] == "False" else None

    cond = wait_for(unschedulable, timeout=60, message="engine-1 PodScheduled=False")
    assert cond["reason"] == "Unschedulable"
    assert f"Insufficient {NPU}" in cond["message"]
    later = pod(cluster, namespace, "engine-1")
    assert later["status"]["phase"] == "Pending"
    assert "nodeName" not in later["spec"]


def test_readiness_gate_holds_ready_until_its_condition_is_true(cluster: Cluster, namespace: str) -> None:
    cluster.apply(npu_pod("gated", npus=1, gates=(GATE,)), namespace=namespace)

    # The stand-in writes the containers ready and the pod's Ready condition in one status update
    # (hack/kwok/pod-stages.yaml pod-start): once both are there, one that ignored the gate shows Ready=True.
    def settled() -> dict[str, Any] | None:
        obj = running(cluster, namespace, "gated")
        if obj is None or condition(obj, "Ready") is None:
            return None
        statuses = obj["status"].get("containerStatuses") or []
        return obj if statuses and all(c["ready"] for c in statuses) else None

    obj = wait_for(settled, timeout=60, message="gated Running with its containers ready and a Ready condition")
    assert condition(obj, GATE) is None, "nothing but the test may write the gate condition"
    assert (condition(obj, "Ready") or {}).get("status") == "False"

    def set_gate(value: str) -> None:
        patch = {"status": {"conditions": [{"type": GATE, "status": value}]}}
        cluster.kubectl(
            "patch",
            "pod",
            "gated",
            "-n",
            namespace,
            "--subresource=status",
            "--type=strategic",
            "-p",
            json.dumps(patch),
        )

    def ready_is(value: str) -> bool:
        return (condition(pod(cluster, namespace, "gated"), "Ready") or {}).get("status") == value

    set_gate("True")
    wait_for(lambda: ready_is("True"), timeout=30, message="Ready=True after the gate turned True")
    set_gate("False")
    wait_for(lambda: ready_is("False"), timeout=30, message="Ready=False after the gate turned False")


def test_garbage_collector_deletes_dependents_of_a_deleted_owner(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("create", "configmap", "owner", "-n", namespace)
    uid = cluster.get_json("configmap", "owner", "-n", namespace)["metadata"]["uid"]
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
    child_cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "child", "ownerReferences": [ref]},
    }
    child_pod = npu_pod("child-pod", npus=1)
    child_pod["metadata"]["ownerReferences"] = [ref]
    cluster.apply(child_cm, namespace=namespace)
    cluster.apply(child_pod, namespace=namespace)
    wait_for(lambda: running(cluster, namespace, "child-pod"), timeout=60, message="child-pod Running")

    cluster.kubectl("delete", "configmap", "owner", "-n", namespace)

    def gone(kind: str, name: str) -> bool:
        try:
            cluster.kubectl("get", kind, name, "-n", namespace)
        except KubectlError as exc:
            return "NotFound" in exc.stderr
        return False

    wait_for(lambda: gone("configmap", "child"), timeout=60, message="GC deleting the child ConfigMap")
    wait_for(lambda: gone("pod", "child-pod"), timeout=60, message="GC deleting the child pod")


@LOCAL_ONLY
def test_local_cluster_up_is_idempotent_and_down_leaves_nothing(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    state = tmp_path_factory.mktemp("second-cluster")
    first = start_local(state, nodes=1)
    pids = first.pids()
    assert sorted(pids) == sorted(["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"])
    assert all(pid_running(p) for p in pids.values())
    again = start_local(state, nodes=2)  # reuses the running cluster and only adds a node
    assert again.kubeconfig == first.kubeconfig
    assert again.pids() == pids
    assert sorted(again.node_names()) == ["atlas-a2-0", "atlas-a2-1"]
    status = subprocess.run(
        [str(LOCAL_CLUSTER), "status"],
        env={**os.environ, "AIS_CLUSTER_DIR": str(state)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert status.returncode == 0
    assert "atlas-a2-1" in status.stdout

    assert stop_local(again) == []
    assert not state.exists()
    assert not any(pid_running(p) for p in pids.values())
