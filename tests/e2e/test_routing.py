"""spec.routing.inferencePool on a real control plane with the Gateway API Inference Extension's v1 CRD.

Why it exists: the pool the operator writes is only as good as what the real API server accepts and what
its selector really selects. The GIE v1.0.0 InferencePool CRD (from the upstream Go module, via
hack/build-k8s.sh) is installed into the session's cluster, so the API server validates every pool the
operator writes with upstream's schema and CEL rules; the pool's selector is then run through the API
server's own label selection and must return exactly the service's engine pods, through a roll (a pod
deleted and replaced) and a scale change, and never another service's pods.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ascend_operator.api.parse import parse_resource
from ascend_operator.render.inferencepool import build_inference_pool
from ascend_operator.render.pod import Owner
from harness.cluster import Cluster, KubectlError, wait_for
from tests.e2e.operator_fixtures import (
    AddNodes,
    Proc,
    ais,
    condition,
    events,
    example,
    label_nodes,
    live_pods,
    routed,
    wait_condition,
)

pytestmark = pytest.mark.usefixtures("delete_services_first")


def pool(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = cluster.get_json("inferencepools.inference.networking.k8s.io", name, "-n", namespace)
    return result


def selected_uids(cluster: Cluster, namespace: str, body: dict[str, Any]) -> set[str]:
    """The pods the API server returns for the pool's selector (live ones: a terminating pod is leaving)."""
    selector = ",".join(f"{k}={v}" for k, v in body["spec"]["selector"]["matchLabels"].items())
    items = cluster.get_json("pods", "-n", namespace, "-l", selector)["items"]
    return {p["metadata"]["uid"] for p in items if not p["metadata"].get("deletionTimestamp")}


def service_uids(cluster: Cluster, namespace: str, service: str) -> set[str]:
    return {p["metadata"]["uid"] for p in live_pods(cluster, namespace, service)}


def test_pool_is_accepted_and_selects_exactly_the_services_pods_through_roll_and_scale(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, gie_crd: dict[str, Any]
) -> None:
    label_nodes(cluster, add_nodes(3), namespace)
    body = routed("dsv4-flash", namespace)
    cluster.apply(body, namespace=namespace)
    cluster.apply(example("neighbour", node_label=namespace), namespace=namespace)  # same namespace, no pool
    wait_condition(cluster, namespace, "dsv4-flash", "InferencePoolReady", ("True", "Synced"), timeout=60)
    stored = pool(cluster, namespace, "dsv4-flash")
    service = ais(cluster, namespace, "dsv4-flash")
    # the API server stored exactly what the builder writes: no defaulting left, nothing pruned
    parsed = parse_resource({**body, "metadata": {**body["metadata"], "namespace": namespace}})
    owner = Owner(name="dsv4-flash", namespace=namespace, uid=service["metadata"]["uid"])
    assert stored["spec"] == build_inference_pool(parsed.spec, owner=owner)["spec"]
    (ref,) = stored["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["uid"], ref["controller"]) == ("AscendInferenceService", owner.uid, True)
    assert events(cluster, namespace, "Synced")

    first = wait_for(lambda: service_uids(cluster, namespace, "dsv4-flash"), timeout=60, message="the engine pod")
    wait_for(lambda: service_uids(cluster, namespace, "neighbour"), timeout=60, message="the neighbour's pod")
    assert selected_uids(cluster, namespace, stored) == first

    # a roll: the pod goes, the operator creates its successor, the pool selects the successor only
    cluster.kubectl("delete", "pod", "dsv4-flash-0", "-n", namespace, "--wait=false")

    def successor() -> set[str] | None:
        now = service_uids(cluster, namespace, "dsv4-flash")
        return now if now and not now & first else None

    fresh = wait_for(successor, timeout=120, message="the replacement pod of dsv4-flash-0")
    assert selected_uids(cluster, namespace, stored) == fresh

    # a scale change: both replicas selected, still not the neighbour's pod
    cluster.kubectl("patch", "ais", "dsv4-flash", "-n", namespace, "--type=merge", "-p", '{"spec":{"replicas":2}}')
    two = wait_for(
        lambda: len(u := service_uids(cluster, namespace, "dsv4-flash")) == 2 and u,
        timeout=90,
        message="two replicas",
    )
    assert selected_uids(cluster, namespace, pool(cluster, namespace, "dsv4-flash")) == two
    assert not selected_uids(cluster, namespace, stored) & service_uids(cluster, namespace, "neighbour")

    # a gateway accepting the pool (what its controller writes into status.parents) shows on the condition
    parent = {
        "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gw"},
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Accepted",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    cluster.kubectl(
        "patch", "inferencepools", "dsv4-flash", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"parents": [parent]}}),
    )  # fmt: skip
    wait_for(
        lambda: any(
            c["type"] == "InferencePoolReady" and c["message"].endswith("; accepted by Gateway inference-gw")
            for c in ais(cluster, namespace, "dsv4-flash")["status"]["conditions"]
        ),
        timeout=60,
        message="InferencePoolReady naming the gateway that accepted the pool",
    )

    # deleting the service takes the pool with it (garbage collection through the owner reference)
    cluster.kubectl("delete", "ais", "dsv4-flash", "-n", namespace, "--wait=true", "--timeout=60s")
    wait_for(
        lambda: "dsv4-flash" not in cluster.kubectl("get", "inferencepools", "-n", namespace, "-o", "name"),
        timeout=60,
        message="the InferencePool garbage-collected",
    )


def test_turning_routing_off_deletes_the_pool_and_its_condition(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, gie_crd: dict[str, Any]
) -> None:
    label_nodes(cluster, add_nodes(1), namespace)
    cluster.apply(routed("svc", namespace), namespace=namespace)
    wait_condition(cluster, namespace, "svc", "InferencePoolReady", ("True", "Synced"), timeout=60)
    uid = wait_for(lambda: service_uids(cluster, namespace, "svc"), timeout=60, message="the engine pod")
    patch = {"spec": {"routing": {"inferencePool": {"enabled": False}}}}
    cluster.kubectl("patch", "ais", "svc", "-n", namespace, "--type=merge", "-p", json.dumps(patch))
    wait_for(
        lambda: not cluster.kubectl("get", "inferencepools", "-n", namespace, "-o", "name").strip(),
        timeout=60,
        message="the pool deleted",
    )
    wait_for(
        lambda: condition(ais(cluster, namespace, "svc"), "InferencePoolReady") is None,
        timeout=30,
        message="the InferencePoolReady condition dropped",
    )
    assert service_uids(cluster, namespace, "svc") == uid  # routing is not part of the pod: no restart


def test_the_api_server_enforces_both_schemas(
    cluster: Cluster, namespace: str, crd: None, gie_crd: dict[str, Any]
) -> None:
    # ours: enabled needs an endpoint picker (CEL twin of InferencePoolNeedsEndpointPicker)
    body = routed("no-picker", namespace)
    del body["spec"]["routing"]["inferencePool"]["endpointPickerRef"]
    with pytest.raises(KubectlError) as err:
        cluster.apply(body, namespace=namespace)
    assert "spec.routing.inferencePool.endpointPickerRef is required" in err.value.stderr

    # upstream's: one target port at most; a Service reference needs a port (GIE's own CEL rule, which the
    # API server evaluates only on an object that passes the schema, so one violation at a time)
    def pool_with(**spec: Any) -> dict[str, Any]:
        base = {
            "selector": {"matchLabels": {"a": "b"}},
            "targetPorts": [{"number": 8000}],
            "endpointPickerRef": {"name": "epp", "port": {"number": 9002}},
        }
        return {
            "apiVersion": "inference.networking.k8s.io/v1",
            "kind": "InferencePool",
            "metadata": {"name": "bad", "namespace": namespace},
            "spec": {**base, **spec},
        }

    for spec, message in (
        ({"targetPorts": [{"number": 8000}, {"number": 8001}]}, "spec.targetPorts: Too many: 2"),
        ({"endpointPickerRef": {"name": "epp"}}, "port is required when kind is 'Service'"),
        ({"selector": {"matchLabels": {"a": "-b-"}}}, "spec.selector.matchLabels.a"),
    ):
        with pytest.raises(KubectlError) as err:
            cluster.apply(pool_with(**spec))
        assert message in err.value.stderr
    cluster.apply(pool_with())  # and the valid one is accepted
