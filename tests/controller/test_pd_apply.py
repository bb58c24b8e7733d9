"""spec.disaggregation through the reconcile pass, against the in-memory API server: the parent makes its two
role services and its router in P/D mode, runs no engine of its own, keeps the roles in line with its spec
(a scale keeps the ratio), reports the pair in its status, and removes the roles when the split goes.
"""

from __future__ import annotations

import copy
from typing import Any

from ascend_operator.controller.reconcile import Context, reconcile
from ascend_operator.controller.service_state import ServiceMemory
from tests.fixtures.kube import FakeKube

ROUTER = {"image": "registry.example/vllm-router:0.1.17"}
KIND = "AscendInferenceService"


def body(example_body: dict[str, Any], **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(example_body)
    out["metadata"].update({"namespace": "llm", "uid": "ais-uid", "generation": 1})
    out["spec"].update(spec)
    return out


def context(kube: FakeKube, events: list[tuple[str, str, str]]) -> Context:
    return Context(kube=kube, events=lambda *e: events.append(e), now=lambda: "2026-12-01T00:00:00Z")


def role_writes(kube: FakeKube) -> list[tuple[str, str]]:
    return [(c.verb, c.name) for c in kube.calls if c.kind == KIND and c.verb in ("create", "patch", "delete")]


async def test_a_disaggregated_service_runs_its_roles_not_engines_of_its_own(example_body: dict[str, Any]) -> None:
    kube, events = FakeKube(), list[tuple[str, str, str]]()
    split = body(example_body, router=ROUTER, replicas=1, disaggregation={"decode": {"replicas": 2}})
    status = await reconcile(split, context(kube, events), ServiceMemory())
    assert role_writes(kube) == [("create", "dsv4-flash-prefill"), ("create", "dsv4-flash-decode")]
    assert [
        p
        for p in kube.of_kind("Pod", "llm")
        if p["metadata"]["labels"].get("inference.ascend.dev/service") == "dsv4-flash"
    ] == []
    decode = kube.obj(KIND, "dsv4-flash-decode", "llm")
    assert decode is not None
    assert decode["spec"]["replicas"] == 2
    deployment = kube.obj("Deployment", "dsv4-flash-router", "llm")
    assert deployment is not None
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--vllm-pd-disaggregation" in args
    assert args[args.index("--decode-selector") + 1] == "inference.ascend.dev/service=dsv4-flash-decode"
    assert [(r["role"], r["desiredReplicas"], r["readyReplicas"]) for r in status["roles"]] == [
        ("prefill", 1, 0),
        ("decode", 2, 0),
    ]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    assert ready["reason"] == "Pending"
    assert status["endpoint"] == "http://dsv4-flash-router.llm.svc:30000"
    assert status["selector"] == "inference.ascend.dev/service=dsv4-flash-decode"
    assert ("Normal", "RoleCreated", f"created {KIND} dsv4-flash-decode") in events

    kube.calls.clear()
    await reconcile(split, context(kube, events), ServiceMemory())
    assert role_writes(kube) == []  # nothing changed: no write

    kube.calls.clear()
    scaled = body(example_body, router=ROUTER, replicas=3, disaggregation={"decode": {"replicas": 2}})
    await reconcile(scaled, context(kube, events), ServiceMemory())
    assert sorted(role_writes(kube)) == [("patch", "dsv4-flash-decode"), ("patch", "dsv4-flash-prefill")]
    decode, prefill = kube.obj(KIND, "dsv4-flash-decode", "llm"), kube.obj(KIND, "dsv4-flash-prefill", "llm")
    assert decode is not None
    assert prefill is not None
    assert (prefill["spec"]["replicas"], decode["spec"]["replicas"]) == (3, 6)  # the 1:2 ratio is kept

    kube.calls.clear()
    previous = {"roles": [{"role": "prefill", "service": "dsv4-flash-prefill"}]}
    whole = body(example_body, router=ROUTER)
    whole["status"] = previous
    status = await reconcile(whole, context(kube, events), ServiceMemory())
    assert sorted(role_writes(kube)) == [("delete", "dsv4-flash-decode"), ("delete", "dsv4-flash-prefill")]
    assert status["roles"] is None  # cleared from the stored status
    assert kube.of_kind("Pod", "llm")  # the service runs engines of its own again


async def test_an_edit_of_a_role_is_undone_by_the_parent(example_body: dict[str, Any]) -> None:
    kube, events = FakeKube(), list[tuple[str, str, str]]()
    split = body(example_body, router=ROUTER, disaggregation={})
    await reconcile(split, context(kube, events), ServiceMemory())
    decode = kube.obj(KIND, "dsv4-flash-decode", "llm")
    assert decode is not None
    kube.add({**decode, "spec": {**decode["spec"], "replicas": 5}}, namespace="llm")  # kubectl edit
    kube.calls.clear()
    await reconcile(split, context(kube, events), ServiceMemory())
    assert role_writes(kube) == [("patch", "dsv4-flash-decode")]
    decode = kube.obj(KIND, "dsv4-flash-decode", "llm")
    assert decode is not None
    assert decode["spec"]["replicas"] == 1
