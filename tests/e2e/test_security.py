"""Issue 19 end to end: an engine with an API key from a Secret refuses strangers and still turns Ready,
and the key shows up nowhere a user or a log reader can see; the NetworkPolicy is owned and reconciled.

The operator runs at DEBUG (kopf then logs every patch it sends), so "not in the operator's log" covers
the most it ever writes. The simulators get the key the way the kubelet gives it to vLLM: `aissim
attach` resolves the pod's secretKeyRef, and the simulator enforces it as vLLM does (401 on /v1).
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.cluster import Cluster, KubectlError, wait_for
from tests.e2e.operator_fixtures import (
    AddNodes,
    Proc,
    ais,
    example,
    http_status,
    label_nodes,
    live_pods,
    pods,
    ready,
    start_operator,
)

pytestmark = pytest.mark.usefixtures("delete_services_first")
FAST = {"startupGraceSeconds": 600, "scrapeIntervalSeconds": 1, "canary": {"periodSeconds": 2, "timeoutSeconds": 5}}
SECRET = "ascend-engine-api-key"


@pytest.fixture(scope="module")
def debug_operator(cluster: Cluster, crd: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    """The operator at DEBUG, its whole output in a file the test reads."""
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    proc = start_operator(cluster, log, "--log-level", "DEBUG", port_base=19080)
    yield proc
    proc.stop()


def test_keyed_engine_refuses_strangers_turns_ready_and_the_key_is_nowhere(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, debug_operator: Proc, attach: Callable[..., Proc]
) -> None:
    attach()
    key = "k-" + secrets.token_urlsafe(24)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET},
        "data": {"token": base64.b64encode(key.encode()).decode()},
    }
    cluster.apply(secret, namespace=namespace)
    label_nodes(cluster, add_nodes(1), namespace)
    service = example(
        "svc", node_label=namespace, health=FAST, auth={"apiKeySecretRef": {"name": SECRET, "key": "token"}}
    )
    cluster.apply(service, namespace=namespace)
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=120, message="Ready through the keyed canary")

    pod = pods(cluster, namespace, "svc")[0]
    base = f"http://{pod['status']['podIP']}:8000"
    completion = {"model": "deepseek-v4-flash", "prompt": "hi", "max_tokens": 2}
    assert http_status("POST", base + "/v1/completions", body=completion) == 401
    assert http_status("GET", base + "/v1/models", key="wrong") == 401
    assert http_status("POST", base + "/v1/completions", key=key, body=completion) == 200
    assert http_status("GET", base + "/metrics") == 200  # scrapers need no key, as with vLLM

    engine = pod["spec"]["containers"][0]
    assert {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "token"}}} in engine["env"]
    seen = {
        "kubectl get ais -o yaml": cluster.kubectl("get", "ais", "-n", namespace, "-o", "yaml"),
        "kubectl get pods -o yaml": cluster.kubectl("get", "pods", "-n", namespace, "-o", "yaml"),
        "kubectl get events -o yaml": cluster.kubectl("get", "events", "-n", namespace, "-o", "yaml"),
        "kubectl describe ais": cluster.kubectl("describe", "ais", "-n", namespace),
        "operator log": debug_operator.output(),
    }
    assert "svc" in seen["operator log"]  # the log is the operator's and covers this service
    for where, text in seen.items():
        assert key not in text, f"the API key appears in {where}"

    policy = cluster.get_json("networkpolicy", "svc", "-n", namespace)
    assert policy["metadata"]["ownerReferences"][0]["uid"] == ais(cluster, namespace, "svc")["metadata"]["uid"]
    assert policy["spec"]["podSelector"] == {"matchLabels": {"inference.ascend.dev/service": "svc"}}

    # Rotation: a container reads its secretKeyRef once, so a new key must replace the engine (the
    # operator hashes the Secret's resourceVersion into the pod), which then accepts only the new key.
    rotated = "k-" + secrets.token_urlsafe(24)
    cluster.apply({**secret, "data": {"token": base64.b64encode(rotated.encode()).decode()}}, namespace=namespace)

    def fresh_pod() -> dict[str, Any] | None:
        new = [
            p
            for p in live_pods(cluster, namespace, "svc")
            if p["metadata"]["uid"] != pod["metadata"]["uid"] and p["status"].get("podIP")
        ]
        return new[0] if new and ready(cluster, namespace, "svc") else None

    replacement = wait_for(fresh_pod, timeout=150, message="the engine replaced after the rotation, Ready again")
    base = f"http://{replacement['status']['podIP']}:8000"
    assert http_status("POST", base + "/v1/completions", key=rotated, body=completion) == 200
    assert http_status("POST", base + "/v1/completions", key=key, body=completion) == 401
    for where, text in {
        "operator log": debug_operator.output(),
        "kubectl get pods -o yaml": cluster.kubectl("get", "pods", "-n", namespace, "-o", "yaml"),
    }.items():
        assert rotated not in text, f"the rotated key appears in {where}"


def test_network_policy_follows_the_spec_and_goes_when_turned_off(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, debug_operator: Proc
) -> None:
    label_nodes(cluster, add_nodes(1), namespace)
    cluster.apply(example("svc", node_label=namespace, health=FAST), namespace=namespace)
    policy = wait_for(
        lambda: cluster.get_json("networkpolicy", "-n", namespace)["items"], timeout=60, message="a NetworkPolicy"
    )
    assert policy[0]["spec"]["ingress"][0]["from"][0] == {"podSelector": {}}
    closed = example(
        "svc",
        node_label=namespace,
        health=FAST,
        networkPolicy={"allowSameNamespace": False, "monitoringNamespaces": ["mon"]},
    )
    cluster.apply(closed, namespace=namespace)

    def peers() -> list[dict[str, Any]] | None:
        items = cluster.get_json("networkpolicy", "-n", namespace)["items"]
        rules = items[0]["spec"]["ingress"] if items else []
        return rules if len(rules) == 3 else None

    rules = wait_for(peers, timeout=60, message="the policy patched")
    assert {"podSelector": {}} not in rules[0]["from"]
    assert rules[2]["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}}}]
    off = example("svc", node_label=namespace, health=FAST, networkPolicy={"enabled": False})
    cluster.apply(off, namespace=namespace)
    wait_for(
        lambda: not cluster.get_json("networkpolicy", "-n", namespace)["items"], timeout=60, message="policy removed"
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("engine", {"extraArgs": ["--api-key=k-literal"]}, "spec.engine.extraArgs may not contain --api-key"),
        ("env", [{"name": "VLLM_API_KEY", "value": "k-literal"}], "spec.env may not set VLLM_API_KEY"),
    ],
)
def test_a_literal_key_is_refused_at_apply(
    cluster: Cluster, namespace: str, crd: None, field: str, value: Any, message: str
) -> None:
    body = example("literal", node_label=namespace)
    body["spec"][field] = {**body["spec"][field], **value} if isinstance(value, dict) else value
    with pytest.raises(KubectlError) as err:
        cluster.apply(body, namespace=namespace)
    assert message in err.value.stderr
