"""Issue 3 on a real control plane: the operator reconciles AscendInferenceServices into NPU pods.

Every test pins its services to fake Atlas nodes it adds and labels itself, so tests never compete for
NPUs. The simulators run for the whole module, so pods also become Ready through the operator's canary.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from harness.cluster import Cluster, KubectlError, wait_for
from tests.e2e.operator_fixtures import (
    AddNodes,
    Proc,
    ais,
    bound_pods,
    condition,
    events,
    example,
    label_nodes,
    live_pods,
    pods,
    start_operator,
    wait_condition,
)

pytestmark = pytest.mark.usefixtures("delete_services_first")


def test_example_becomes_a_bound_npu_pod_a_service_and_a_ready_status(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    operator: Proc,
    simulators: Proc,
) -> None:
    label_nodes(cluster, add_nodes(1), namespace)
    cluster.apply(example("dsv4-flash", node_label=namespace), namespace=namespace)
    bound = wait_for(
        lambda: bound_pods(cluster, namespace, "dsv4-flash"),
        timeout=60,
        message="the engine pod bound to a node",
    )
    pod = bound[0]
    assert pod["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend910"] == "8"
    node = cluster.get_json("node", pod["spec"]["nodeName"])
    assert node["status"]["allocatable"]["huawei.com/Ascend910"] == "8"
    service = cluster.get_json("service", "dsv4-flash", "-n", namespace)
    assert service["spec"]["selector"] == {"inference.ascend.dev/service": "dsv4-flash"}
    wait_condition(cluster, namespace, "dsv4-flash", "Ready", ("True", "AllReplicasReady"), timeout=120)
    status = ais(cluster, namespace, "dsv4-flash")["status"]
    assert (status["replicas"], status["readyReplicas"], status["desiredReplicas"]) == (1, 1, 1)
    assert condition(ais(cluster, namespace, "dsv4-flash"), "Degraded") == ("False", "AsExpected")
    table = cluster.kubectl("get", "ais", "-n", namespace)
    assert "dsv4-flash" in table
    assert "327680" in table


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"parallelism": {"tensor": 4, "data": 1}},
            "spec.parallelism.tensor x spec.parallelism.data must equal spec.npus",
        ),
        (
            {
                "engine": {
                    "longContext": {"enabled": True},
                    "speculative": {"method": "dspark", "numSpeculativeTokens": 5},
                }
            },
            "DSpark5 -> width 6 does not",
        ),
        ({"engine": {"extraArgs": ["--max-model-len=4096"]}}, "spec.engine.extraArgs may not repeat a flag"),
        ({"engine": {"gpuMemoryUtilization": 1.5}}, "spec.engine.gpuMemoryUtilization"),
        ({"resources": {"limits": {"memory": "32Gi"}}}, "must exceed spec.runtime.shmSize"),
        ({"resources": {"requests": {"cpu": "64"}, "limits": {"cpu": "8"}}}, "may not exceed spec.resources.limits"),
    ],
    ids=["tp-x-dp", "dspark5-long-context", "extra-args", "range", "shm-over-limit", "request-over-limit"],
)
def test_bad_specs_are_rejected_at_apply_naming_the_field(
    cluster: Cluster,
    namespace: str,
    crd: None,
    change: dict[str, object],
    message: str,
) -> None:
    body = example("bad", node_label=namespace)
    for key, value in change.items():
        body["spec"][key] = {**body["spec"].get(key, {}), **value}  # type: ignore[dict-item]
    with pytest.raises(KubectlError) as err:
        cluster.apply(body, namespace=namespace)
    assert message in err.value.stderr


def test_removed_vllm_ascend_key_is_an_invalid_spec_condition(cluster: Cluster, namespace: str, operator: Proc) -> None:
    body = example("old-keys", node_label=namespace)
    body["spec"]["engine"]["additionalConfig"] = {"extra": {"torchair_graph_config": {"enabled": True}}}
    cluster.apply(body, namespace=namespace)
    wait_condition(cluster, namespace, "old-keys", "Degraded", ("True", "InvalidSpec"), timeout=60)
    degraded = next(c for c in ais(cluster, namespace, "old-keys")["status"]["conditions"] if c["type"] == "Degraded")
    assert "removed them in v0.12.0rc1" in degraded["message"]
    assert events(cluster, namespace, "RemovedAdditionalConfigKey")
    assert pods(cluster, namespace, "old-keys") == []


def test_spec_that_passes_the_crd_but_not_the_budget_is_a_condition_and_an_event(
    cluster: Cluster,
    namespace: str,
    operator: Proc,
) -> None:
    body = example("too-big", node_label=namespace)
    body["spec"]["engine"]["maxNumBatchedTokens"] = 32768
    cluster.apply(body, namespace=namespace)
    wait_condition(cluster, namespace, "too-big", "Degraded", ("True", "InvalidSpec"), timeout=60)
    ready = next(c for c in ais(cluster, namespace, "too-big")["status"]["conditions"] if c["type"] == "Ready")
    assert "HBMBudget" not in ready["message"]
    assert "startup" in ready["message"]
    assert wait_for(lambda: events(cluster, namespace, "HBMBudget"), timeout=30, message="HBMBudget event")
    assert pods(cluster, namespace, "too-big") == []
    assert operator.popen.poll() is None  # nothing crashed


def test_second_service_reports_insufficient_npu_until_a_node_is_added(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    operator: Proc,
) -> None:
    label_nodes(cluster, add_nodes(1), namespace)
    cluster.apply(example("first", node_label=namespace), namespace=namespace)
    wait_for(lambda: bound_pods(cluster, namespace, "first"), timeout=60)
    cluster.apply(example("second", node_label=namespace), namespace=namespace)
    wait_condition(cluster, namespace, "second", "Ready", ("False", "InsufficientNPU"), timeout=60)
    ready = next(c for c in ais(cluster, namespace, "second")["status"]["conditions"] if c["type"] == "Ready")
    assert "Insufficient huawei.com/Ascend910" in ready["message"]
    assert events(cluster, namespace, "InsufficientNPU")
    label_nodes(cluster, add_nodes(1), namespace)
    wait_for(
        lambda: bound_pods(cluster, namespace, "second"),
        timeout=90,
        message="the second service's pod bound to the new node",
    )
    wait_for(
        lambda: condition(ais(cluster, namespace, "second"), "Degraded") == ("False", "AsExpected"),
        timeout=60,
        message="Degraded cleared",
    )


def test_spec_change_replaces_the_pod_once_and_delete_removes_children(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    operator: Proc,
) -> None:
    label_nodes(cluster, add_nodes(1), namespace)
    cluster.apply(example("svc", node_label=namespace), namespace=namespace)
    first = wait_for(lambda: pods(cluster, namespace, "svc"), timeout=60)[0]["metadata"]["uid"]
    patch = {"spec": {"engine": {"maxNumSeqs": 16}}}
    cluster.kubectl("patch", "ais", "svc", "-n", namespace, "--type=merge", "-p", json.dumps(patch))

    def replaced() -> list[dict[str, Any]]:
        current = pods(cluster, namespace, "svc")
        fresh = [p for p in current if p["metadata"]["uid"] != first]
        return fresh if fresh and len(current) == 1 else []

    new = wait_for(replaced, timeout=120, message="the pod replaced with the new spec")[0]
    assert (
        "16" in new["spec"]["containers"][0]["args"][new["spec"]["containers"][0]["args"].index("--max-num-seqs") + 1]
    )
    assert len(events(cluster, namespace, "SpecChanged")) == 1
    cluster.kubectl("delete", "ais", "svc", "-n", namespace, "--wait=true", "--timeout=60s")
    wait_for(lambda: pods(cluster, namespace, "svc") == [], timeout=90, message="pods garbage-collected")
    wait_for(
        lambda: "svc" not in cluster.kubectl("get", "services", "-n", namespace, "-o", "name"),
        timeout=60,
        message="Service garbage-collected",
    )


def test_kubectl_scale_uses_the_scale_subresource(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc
) -> None:
    label_nodes(cluster, add_nodes(2), namespace)
    cluster.apply(example("svc", node_label=namespace), namespace=namespace)
    wait_for(lambda: len(pods(cluster, namespace, "svc")) == 1, timeout=60, message="one pod")
    cluster.kubectl("scale", "ais/svc", "-n", namespace, "--replicas=2")
    wait_for(lambda: len(pods(cluster, namespace, "svc")) == 2, timeout=60, message="scaled to two pods")
    scale = cluster.get_json("ais", "svc", "-n", namespace, "--subresource=scale")
    assert scale["spec"]["replicas"] == 2
    assert scale["status"]["selector"] == "inference.ascend.dev/service=svc"
    wait_for(
        lambda: cluster.get_json("ais", "svc", "-n", namespace, "--subresource=scale")["status"].get("replicas") == 2,
        timeout=60,
        message="status.replicas follows",
    )
    cluster.kubectl("scale", "ais/svc", "-n", namespace, "--replicas=1")
    wait_for(
        lambda: len(live_pods(cluster, namespace, "svc")) == 1,
        timeout=60,
        message="scaled back to one pod",
    )


def test_operator_killed_mid_reconcile_converges_without_duplicates(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    crd: None,
    tmp_path: Path,
) -> None:
    label_nodes(cluster, add_nodes(3), namespace)
    first = start_operator(cluster, tmp_path / "first.log")
    try:
        cluster.apply(example("trio", node_label=namespace, replicas=3), namespace=namespace)
        wait_for(lambda: pods(cluster, namespace, "trio"), timeout=60, message="a first pod")
        first.stop(signal.SIGKILL)  # mid-reconcile: some pods may exist, status may be stale
    finally:
        first.stop(signal.SIGKILL)
    second = start_operator(cluster, tmp_path / "second.log")
    try:
        wait_for(lambda: len(pods(cluster, namespace, "trio")) == 3, timeout=90, message="three pods")
        wait_for(lambda: ais(cluster, namespace, "trio").get("status", {}).get("replicas") == 3, timeout=60)
        items = pods(cluster, namespace, "trio")
        assert sorted(p["metadata"]["name"] for p in items) == ["trio-0", "trio-1", "trio-2"]
        owner = ais(cluster, namespace, "trio")["metadata"]["uid"]
        assert all(p["metadata"]["ownerReferences"][0]["uid"] == owner for p in items)
        assert len({p["spec"]["nodeName"] for p in items if p["spec"].get("nodeName")}) == 3
    finally:
        cluster.kubectl("delete", "ais", "trio", "-n", namespace, "--wait=true", "--timeout=60s")
        second.stop()
