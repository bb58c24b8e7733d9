"""spec.router through the reconcile pass, against the in-memory API server: the router's objects are made
(identity and rights before its pods), kept without writes while nothing changes, re-rendered when the
engines' slots change, removed when spec.router goes (its budget last, so a pass cut off half-way finishes
the removal), and a chart without the router's rights leaves the engines serving with an event saying so.
The router's own arguments and objects are in tests/render/test_render_router.py.
"""

from __future__ import annotations

import copy
from typing import Any

import kopf
import pytest

from ascend_operator.clients.kube import ApiRefused
from ascend_operator.controller.reconcile import Context, reconcile
from ascend_operator.controller.service_state import ServiceMemory
from tests.fixtures.kube import FakeKube

ROUTER = {"image": "registry.example/vllm-router:0.1.17"}
KINDS = ["ServiceAccount", "Role", "RoleBinding", "Deployment", "Service", "PodDisruptionBudget"]


def body(example_body: dict[str, Any], **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(example_body)
    out["metadata"].update({"namespace": "llm", "uid": "ais-uid", "generation": 1})
    out["spec"].update(spec)
    return out


def context(kube: FakeKube, events: list[tuple[str, str, str]]) -> Context:
    return Context(kube=kube, events=lambda *e: events.append(e), now=lambda: "2026-12-01T00:00:00Z")


def router_writes(kube: FakeKube) -> list[tuple[str, str]]:
    return [
        (c.verb, c.kind)
        for c in kube.calls
        if c.name == "dsv4-flash-router" and c.verb in ("create", "patch", "delete")
    ]


async def test_the_router_is_made_kept_and_removed(example_body: dict[str, Any]) -> None:
    kube, events = FakeKube(), list[tuple[str, str, str]]()
    routed = body(example_body, router=ROUTER)
    await reconcile(routed, context(kube, events), ServiceMemory())
    assert router_writes(kube) == [("create", kind) for kind in KINDS]
    deployment = kube.obj("Deployment", "dsv4-flash-router", "llm")
    assert deployment is not None
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--service-discovery" in args
    assert args[args.index("--service-discovery-namespace") + 1] == "llm"
    assert args[args.index("--max-concurrent-requests") + 1] == str(routed["spec"]["engine"].get("maxNumSeqs", 32))
    role = kube.obj("Role", "dsv4-flash-router", "llm")
    assert role is not None
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]
    assert "dsv4-flash-router" not in {p["metadata"]["name"] for p in kube.of_kind("Pod", "llm")}
    assert ("Normal", "RouterCreated", "created Deployment dsv4-flash-router") in events
    policy = kube.obj("NetworkPolicy", "dsv4-flash", "llm")
    assert policy is not None
    assert {"podSelector": {"matchLabels": {"inference.ascend.dev/router": "dsv4-flash"}}} in [
        peer for rule in policy["spec"]["ingress"] for peer in rule["from"]
    ]  # the router may reach the engine port

    kube.calls.clear()
    await reconcile(routed, context(kube, events), ServiceMemory())  # nothing changed: no write
    assert router_writes(kube) == []

    kube.calls.clear()
    more = body(example_body, router=ROUTER, replicas=3)  # more engine slots: the router admits more
    await reconcile(more, context(kube, events), ServiceMemory())
    assert router_writes(kube) == [("patch", "Deployment")]

    kube.calls.clear()
    await reconcile(body(example_body), context(kube, events), ServiceMemory())
    removed = [k for verb, k in router_writes(kube) if verb == "delete"]
    assert removed[-1] == "PodDisruptionBudget"
    assert sorted(removed) == sorted(KINDS)
    assert all(kube.obj(kind, "dsv4-flash-router", "llm") is None for kind in KINDS)
    assert kube.obj("Service", "dsv4-flash", "llm") is not None  # the engines' Service stays

    kube.calls.clear()
    await reconcile(body(example_body), context(kube, events), ServiceMemory())
    mine = [(c.verb, c.kind) for c in kube.calls if c.name == "dsv4-flash-router"]
    assert mine == [("get", "PodDisruptionBudget")]  # one (watch-cached) read, no write


async def test_without_the_charts_router_rights_the_engines_serve_and_an_event_says_why(
    example_body: dict[str, Any],
) -> None:
    kube, events = FakeKube(), list[tuple[str, str, str]]()
    refusal = '{"kind":"Status","message":"serviceaccounts is forbidden"}'
    kube.fail("create", "ServiceAccount", lambda: ApiRefused(403, "Forbidden", refusal), times=5)
    status = await reconcile(body(example_body, router=ROUTER), context(kube, events), ServiceMemory())
    assert [p["metadata"]["name"] for p in kube.of_kind("Pod", "llm")] == ["dsv4-flash-0"]
    assert kube.obj("Service", "dsv4-flash", "llm") is not None
    warnings = [e for e in events if e[1] == "RouterForbidden"]
    assert warnings == [
        (
            "Warning",
            "RouterForbidden",
            "the operator may not manage ServiceAccount dsv4-flash-router: install the chart with router.enabled=true",
        )
    ]
    assert status["conditions"]


async def test_an_api_server_that_does_not_answer_is_retried_not_swallowed(example_body: dict[str, Any]) -> None:
    kube = FakeKube()
    kube.fail("create", "Deployment", lambda: kopf.TemporaryError("no answer", delay=5))
    with pytest.raises(kopf.TemporaryError):  # reaches kopf's retry
        await reconcile(body(example_body, router=ROUTER), context(kube, []), ServiceMemory())


async def test_the_status_and_metrics_say_what_the_router_admits(example_body: dict[str, Any]) -> None:
    from prometheus_client import REGISTRY

    kube, events = FakeKube(), list[tuple[str, str, str]]()
    routed = body(example_body, router={**ROUTER, "replicas": 2, "admission": {"queueSize": 10}}, replicas=3)
    status = await reconcile(routed, context(kube, events), ServiceMemory())
    seqs = routed["spec"]["engine"].get("maxNumSeqs", 32)
    assert status["router"] == {
        "service": "dsv4-flash-router",
        "replicas": 2,
        "readyReplicas": 0,  # the Deployment was just created
        "maxConcurrentRequests": 3 * seqs // 2 * 2,  # the engines' slots, split between two router replicas
        "queueSize": 20,
        "queueTimeoutSeconds": 60,
        "engineSlots": 3 * seqs,
    }
    labels = {"namespace": "llm", "service": "dsv4-flash"}
    assert REGISTRY.get_sample_value("ascend_operator_router_admission_limit", {**labels, "limit": "queue"}) == 20
    deployment = kube.obj("Deployment", "dsv4-flash-router", "llm")
    assert deployment is not None
    kube.add({**deployment, "status": {"readyReplicas": 1}}, namespace="llm")
    status = await reconcile(routed, context(kube, events), ServiceMemory())
    assert status["router"]["readyReplicas"] == 1
    assert REGISTRY.get_sample_value("ascend_operator_router_ready_replicas", labels) == 1

    status = await reconcile({**body(example_body), "status": status}, context(kube, events), ServiceMemory())
    assert status["router"] is None  # cleared
    assert REGISTRY.get_sample_value("ascend_operator_router_ready_replicas", labels) is None
