"""The reconcile step behind spec.routing.inferencePool, against the in-memory API server.

Why it exists: what a user sees when routing cannot work (the GIE CRD is not installed, the chart was
installed without the rule, someone else owns a pool of that name, the API server rejects the pool) is a
condition and an event naming the fix, and the pass goes on serving; that is only visible with the API
server's answers under control. The real API server's validation of the pool is in
tests/e2e/test_routing.py.
"""

from __future__ import annotations

import copy
from typing import Any

import kopf
import pytest
import yaml

from ascend_operator.api.parse import ParsedService, parse_resource
from ascend_operator.clients.kube import ApiRefused
from ascend_operator.controller.inference_pool import PoolAction, plan_pool, sync_inference_pool
from ascend_operator.controller.reconcile import Context, reconcile
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.controller.views import stored_status
from ascend_operator.render.desired import Desired
from ascend_operator.render.inferencepool import build_inference_pool
from ascend_operator.render.pod import Owner
from tests.fixtures.examples import EXAMPLE
from tests.fixtures.kube import FakeKube
from tests.render.test_inferencepool import PICKER

UID = "3f1c7f9e-0000-4000-8000-000000000001"
OWNER = Owner(name="dsv4-flash", namespace="llm", uid=UID)


def _pool(parsed: ParsedService) -> dict[str, Any] | None:
    """The pool the reconcile pass hands the step: render/desired.py's."""
    return Desired(spec=parsed.spec, owner=OWNER).inference_pool


POOL_KIND = "InferencePool"
REFUSAL = '{"kind":"Status","message":"inferencepools is forbidden"}'


def cluster(*, crd: bool = True, refuse: int | None = None) -> FakeKube:
    """An API server with the GIE CRD installed (or not), refusing every pool request with `refuse`."""
    kube = FakeKube(not_served=set() if crd else {POOL_KIND})
    if refuse is not None:
        kube.fail("*", POOL_KIND, lambda: ApiRefused(refuse, "Forbidden", REFUSAL), times=100)
    return kube


def pool(kube: FakeKube) -> dict[str, Any]:
    found = kube.obj(POOL_KIND, "dsv4-flash", "llm")
    assert found is not None
    return found


def pool_verbs(kube: FakeKube) -> list[str]:
    return [c.verb for c in kube.requests(kind=POOL_KIND)]


def timing_out(kube: FakeKube) -> FakeKube:
    kube.fail("get", POOL_KIND, lambda: kopf.TemporaryError("no answer from the API server: timed out", delay=5))
    return kube


@pytest.fixture
def routed(example_body: dict[str, Any]) -> ParsedService:
    example_body["spec"]["routing"] = {"inferencePool": {"enabled": True, "endpointPickerRef": PICKER}}
    return parse_resource(example_body)


def _cond(result: Any) -> tuple[str, str, str]:
    (cond,) = result
    return cond[0], cond[1], cond[2]


async def test_creates_the_pool_and_reports_it_synced(routed: ParsedService) -> None:
    kube = cluster()
    result = await sync_inference_pool(kube, _pool(routed), OWNER, previous=None)
    assert _cond(result) == ("InferencePoolReady", "True", "Synced")
    assert "selects pods inference.ascend.dev/service=dsv4-flash on port 8000" in result[0][3]
    assert pool(kube)["spec"] == build_inference_pool(routed.spec, owner=OWNER)["spec"]
    again = await sync_inference_pool(kube, _pool(routed), OWNER, previous=None)
    assert again == result
    assert pool_verbs(kube) == ["get", "create", "get"]  # in sync: no write


async def test_a_changed_spec_replaces_the_pools_spec(routed: ParsedService, example_body: dict[str, Any]) -> None:
    kube = cluster()
    await sync_inference_pool(kube, _pool(routed), OWNER, previous=None)
    pool(kube)["spec"]["selector"]["matchLabels"]["stale"] = "x"  # someone edited it
    example_body["spec"]["engine"]["port"] = 8100
    moved = parse_resource(example_body)
    await sync_inference_pool(kube, _pool(moved), OWNER, previous=None)
    assert pool_verbs(kube)[-1] == "patch"
    assert pool(kube)["spec"] == {
        "selector": {"matchLabels": {"inference.ascend.dev/service": "dsv4-flash"}},
        "targetPorts": [{"number": 8100}],
        "endpointPickerRef": {
            "group": "",
            "kind": "Service",
            "name": "dsv4-flash-epp",
            "port": {"number": 9002},
            "failureMode": "FailClose",
        },
    }


async def test_missing_crd_is_a_condition_naming_the_crd_not_an_error(routed: ParsedService) -> None:
    result = await sync_inference_pool(cluster(crd=False), _pool(routed), OWNER, previous=None)
    assert _cond(result) == ("InferencePoolReady", "False", "CRDNotInstalled")
    assert "inferencepools.inference.networking.k8s.io" in result[0][3]


async def test_forbidden_names_the_chart_value(routed: ParsedService) -> None:
    result = await sync_inference_pool(cluster(refuse=403), _pool(routed), OWNER, previous=None)
    assert _cond(result) == ("InferencePoolReady", "False", "Forbidden")
    assert "routing.inferencePool.enabled=true" in result[0][3]
    assert "inferencepools is forbidden" in result[0][3]


async def test_rejected_pool_carries_the_api_servers_message(routed: ParsedService) -> None:
    result = await sync_inference_pool(cluster(refuse=422), _pool(routed), OWNER, previous=None)
    assert _cond(result) == ("InferencePoolReady", "False", "Rejected")


async def test_a_pool_someone_else_owns_is_left_alone(routed: ParsedService) -> None:
    kube = cluster()
    foreign = build_inference_pool(routed.spec, owner=Owner(name="dsv4-flash", namespace="llm", uid="other"))
    kube.add(foreign)
    before = copy.deepcopy(pool(kube))
    result = await sync_inference_pool(kube, _pool(routed), OWNER, previous=None)
    assert _cond(result) == ("InferencePoolReady", "False", "NotOwned")
    assert pool_verbs(kube) == ["get"]
    assert pool(kube) == before


async def test_turning_routing_off_deletes_our_pool_and_drops_the_condition(routed: ParsedService) -> None:
    kube = cluster()
    on = await sync_inference_pool(kube, _pool(routed), OWNER, previous=None)
    previous = {"conditions": [{"type": on[0][0], "status": on[0][1], "reason": on[0][2], "message": on[0][3]}]}
    unrouted = parse_resource(yaml.safe_load(EXAMPLE.read_text()))
    off = await sync_inference_pool(kube, _pool(unrouted), OWNER, previous=stored_status({"status": previous}))
    assert off == ()
    assert kube.of_kind(POOL_KIND, "llm") == []
    assert pool_verbs(kube)[-1] == "delete"


async def test_routing_never_on_makes_no_call(example: ParsedService) -> None:
    kube = cluster(crd=False)
    assert await sync_inference_pool(kube, _pool(example), OWNER, previous=None) == ()
    assert kube.calls == []


def test_plan_pool() -> None:
    desired = {"metadata": {}, "spec": {"a": 1}}
    ours = {"metadata": {"ownerReferences": [{"uid": UID, "controller": True}]}, "spec": {"a": 1}}
    assert plan_pool(desired, None, uid=UID) is PoolAction.CREATE
    assert plan_pool(desired, ours, uid=UID) is PoolAction.NONE
    assert plan_pool(desired, {**ours, "spec": {"a": 2}}, uid=UID) is PoolAction.REPLACE_SPEC
    assert plan_pool(desired, ours, uid="someone-else") is PoolAction.NOT_OWNED
    not_controller = {"metadata": {"ownerReferences": [{"uid": UID}]}, "spec": {"a": 1}}
    assert plan_pool(desired, not_controller, uid=UID) is PoolAction.NOT_OWNED


async def test_reconcile_pass_serves_on_and_reports_a_missing_crd(routed: ParsedService) -> None:
    kube = cluster(crd=False)
    events: list[tuple[str, str, str]] = []
    body = {
        "apiVersion": "inference.ascend.dev/v1alpha1",
        "kind": "AscendInferenceService",
        "metadata": {"name": "dsv4-flash", "namespace": "llm", "uid": UID, "generation": 1},
        "spec": routed.spec.model_dump(by_alias=True, exclude_none=True, mode="json"),
    }
    ctx = Context(kube=kube, events=lambda *e: events.append(e), now=lambda: "2026-12-01T00:00:00Z")
    status = await reconcile(body, ctx, ServiceMemory())
    assert [p["metadata"]["name"] for p in kube.of_kind("Pod", "llm")] == ["dsv4-flash-0"]  # created anyway
    assert kube.obj("Service", "dsv4-flash", "llm") is not None
    pool = next(c for c in status["conditions"] if c["type"] == "InferencePoolReady")
    assert (pool["status"], pool["reason"]) == ("False", "CRDNotInstalled")
    assert ("Warning", "CRDNotInstalled", pool["message"]) in events
    assert [c["type"] for c in status["conditions"]] == [
        "Ready",
        "Available",
        "Progressing",
        "Degraded",
        "InferencePoolReady",
    ]


async def test_an_api_server_that_does_not_answer_is_unknown_and_retried(routed: ParsedService) -> None:
    kube = timing_out(cluster())
    result = await sync_inference_pool(kube, _pool(routed), OWNER, previous=None)
    assert _cond(result) == ("InferencePoolReady", "Unknown", "Retrying")
    assert "timed out" in result[0][3]


async def test_removal_refused_or_unanswered_stays_pending(routed: ParsedService) -> None:
    unrouted = parse_resource(yaml.safe_load(EXAMPLE.read_text()))
    stored = {"conditions": [{"type": "InferencePoolReady", "status": "True", "reason": "Synced", "message": ""}]}
    previous = stored_status({"status": stored})
    refused = await sync_inference_pool(cluster(refuse=403), _pool(unrouted), OWNER, previous=previous)
    assert _cond(refused) == ("InferencePoolReady", "False", "Forbidden")  # kept, so the next pass retries
    pending = await sync_inference_pool(timing_out(cluster()), _pool(unrouted), OWNER, previous=previous)
    assert _cond(pending) == ("InferencePoolReady", "Unknown", "Retrying")


async def test_synced_says_which_gateways_accepted_the_pool(routed: ParsedService) -> None:
    kube = cluster()
    await sync_inference_pool(kube, _pool(routed), OWNER, previous=None)
    pool(kube)["status"] = {
        "parents": [
            {"parentRef": {"name": "inference-gw"}, "conditions": [{"type": "Accepted", "status": "True"}]},
            {
                "parentRef": {"kind": "Gateway", "namespace": "edge", "name": "other"},
                "conditions": [{"type": "Accepted", "status": "False"}],
            },
        ]
    }
    result = await sync_inference_pool(kube, _pool(routed), OWNER, previous=None)
    assert result[0][3].endswith("; accepted by Gateway inference-gw")
    del pool(kube)["status"]
    again = await sync_inference_pool(kube, _pool(routed), OWNER, previous=None)
    assert again[0][3].endswith("; no gateway has accepted it yet")
