"""spec.disaggregation on a real control plane: what `kubectl apply` refuses, and a P/D pair brought up.

Why it exists: the P/D rules are CEL in the CRD, so the API server itself (not the operator) must refuse a
pair vllm-ascend would refuse at engine start, naming the field; and a pair the operator accepts must come up
as two role services with bound engine pods carrying the connector's settings, a router in P/D mode, a
NetworkPolicy letting the roles reach each other, and a parent whose status says when both roles serve. A
scale of the parent must reach both roles with the ratio kept, and removing the split must remove the roles.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.e2e.cluster import Cluster, KubectlError, wait_for
from tests.e2e.operator_fixtures import (
    AddNodes,
    Proc,
    ais,
    condition,
    example,
    label_nodes,
    live_pods,
)

pytestmark = pytest.mark.usefixtures("delete_services_first")

ROUTER = {"image": "registry.example/vllm-router:0.1.17"}


def split(name: str, namespace: str, **pd: Any) -> dict[str, Any]:
    body = example(name, node_label=namespace, router=ROUTER)
    body["spec"]["disaggregation"] = pd
    return body


@pytest.mark.parametrize(
    ("pd", "spec", "message"),
    [
        (
            {"prefill": {"parallelism": {"tensor": 4, "data": 2}}},
            {},
            "the prefill pool's tensor parallelism must be at least the decode pool's",
        ),
        ({}, {"router": None}, "spec.disaggregation needs spec.router"),
        (
            {"decode": {"parallelism": {"tensor": 4, "data": 1}}},
            {},
            "each pool's parallelism.tensor x parallelism.data",
        ),
        ({"decode": {"engine": {"port": 9000}}}, {}, "a pool's engine.port must be spec.engine.port"),
        ({"kvPort": 20000}, {}, "spec.disaggregation.kvPort"),
    ],
    ids=["prefill-tp-below-decode", "no-router", "pool-npus", "pool-port", "kv-port-in-transfer-range"],
)
def test_kubectl_apply_refuses_a_pair_vllm_ascend_would_refuse(
    cluster: Cluster, namespace: str, crd: None, pd: dict[str, Any], spec: dict[str, Any], message: str
) -> None:
    body = split("bad", namespace, **pd)
    for key, value in spec.items():
        if value is None:
            body["spec"].pop(key)
        else:
            body["spec"][key] = value
    with pytest.raises(KubectlError) as err:
        cluster.apply(body, namespace=namespace)
    assert message in err.value.stderr


def _role_ready(cluster: Cluster, namespace: str, name: str) -> bool:
    try:
        return condition(ais(cluster, namespace, name), "Ready") == ("True", "AllReplicasReady")
    except KubectlError:
        return False


def test_a_pair_comes_up_as_two_roles_and_the_parent_serves_when_both_do(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Any
) -> None:
    label_nodes(cluster, add_nodes(3), namespace)
    attach()
    started = time.monotonic()
    cluster.apply(split("pd", namespace, decode={"replicas": 2}), namespace=namespace)
    wait_for(
        lambda: condition(ais(cluster, namespace, "pd"), "Ready") == ("True", "AllRolesReady"),
        timeout=180,
        message="the parent Ready with both roles",
    )
    print(f"pair Ready {time.monotonic() - started:.1f} s after apply")
    assert _role_ready(cluster, namespace, "pd-prefill")
    assert _role_ready(cluster, namespace, "pd-decode")
    status = ais(cluster, namespace, "pd")["status"]
    assert [(r["role"], r["readyReplicas"]) for r in status["roles"]] == [("prefill", 1), ("decode", 2)]
    assert (status["readyReplicas"], status["desiredReplicas"]) == (1, 1)
    assert status["endpoint"] == f"http://pd-router.{namespace}.svc:30000"
    assert live_pods(cluster, namespace, "pd") == []  # the parent runs no engine of its own

    prefill = live_pods(cluster, namespace, "pd-prefill")
    assert len(prefill) == 1
    args = prefill[0]["spec"]["containers"][0]["args"]
    kv = json.loads(args[args.index("--kv-transfer-config") + 1])
    assert kv["kv_role"] == "kv_producer"
    assert kv["kv_connector"] == "MooncakeConnectorV1"
    decode = live_pods(cluster, namespace, "pd-decode")
    assert {p["spec"]["nodeName"] for p in decode}.isdisjoint({prefill[0]["spec"]["nodeName"]})  # 8 NPUs each
    policy = cluster.get_json("networkpolicy", "pd-decode", "-n", namespace)
    peers = [peer for rule in policy["spec"]["ingress"] for peer in rule["from"]]
    assert {"podSelector": {"matchLabels": {"inference.ascend.dev/router": "pd"}}} in peers
    router = cluster.get_json("deployment", "pd-router", "-n", namespace)
    router_args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--vllm-pd-disaggregation" in router_args
    assert router_args[router_args.index("--max-concurrent-requests") + 1] == str(2 * 32)

    # a user's edit of a role is undone by the parent
    cluster.kubectl("patch", "ais", "pd-decode", "-n", namespace, "--type=merge", "-p", '{"spec":{"replicas":5}}')
    wait_for(lambda: ais(cluster, namespace, "pd-decode")["spec"]["replicas"] == 2, timeout=30, message="undone")

    # kubectl scale on the parent reaches both roles, ratio kept
    cluster.kubectl("scale", "ais", "pd", "-n", namespace, "--replicas=0")

    def role_replicas() -> list[int]:
        return [ais(cluster, namespace, f"pd-{role}")["spec"]["replicas"] for role in ("prefill", "decode")]

    wait_for(
        lambda: role_replicas() == [0, 0],
        timeout=30,
        message="both roles scaled to 0",
    )

    # removing the split removes the roles
    cluster.kubectl(
        "patch", "ais", "pd", "-n", namespace, "--type=json",
        "-p", '[{"op":"remove","path":"/spec/disaggregation"}]',
    )  # fmt: skip
    wait_for(
        lambda: not [a for a in cluster.get_json("ais", "-n", namespace)["items"] if a["metadata"]["name"] != "pd"],
        timeout=60,
        message="the roles removed",
    )
    wait_for(lambda: ais(cluster, namespace, "pd")["status"].get("roles") is None, timeout=30, message="roles cleared")
