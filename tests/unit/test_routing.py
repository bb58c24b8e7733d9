"""The reconcile step behind spec.routing.inferencePool, against an in-memory API server.

Why it exists: what a user sees when routing cannot work (the GIE CRD is not installed, the chart was
installed without the rule, someone else owns a pool of that name, the API server rejects the pool) is a
condition and an event naming the fix, and the pass goes on serving; that is only visible with the API
server's answers under control. The real API server's validation of the pool is in
tests/e2e/test_routing.py.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import kopf
import pytest
import yaml

from ascend_operator.api.parse import ParsedService, parse_resource
from ascend_operator.clients.kube import ApiRefused
from ascend_operator.controller.memory import ServiceMemory
from ascend_operator.controller.reconcile import Context, reconcile
from ascend_operator.controller.routing import PoolAction, plan_pool, sync_inference_pool
from ascend_operator.render.inferencepool import build_inference_pool
from ascend_operator.render.pod import Owner
from tests.unit.conftest import EXAMPLE
from tests.unit.test_inferencepool import PICKER

UID = "3f1c7f9e-0000-4000-8000-000000000001"
OWNER = Owner(name="dsv4-flash", namespace="llm", uid=UID)


class FakeKube:
    """The KubeApi calls the reconcile pass makes, over dicts; `pools=None` means no GIE CRD."""

    def __init__(self, *, crd: bool = True, refuse: int | None = None) -> None:
        self.pools: dict[str, dict[str, Any]] | None = {} if crd else None
        self.refuse = refuse
        self.calls: list[str] = []
        self.pods: list[dict[str, Any]] = []
        self.service: dict[str, Any] | None = None
        self.status: dict[str, Any] = {}

    def _gate(self, verb: str) -> None:
        self.calls.append(verb)
        if self.refuse is not None:
            raise ApiRefused(self.refuse, "Forbidden", '{"kind":"Status","message":"inferencepools is forbidden"}')

    async def read_inference_pool(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._gate("get")
        return None if self.pools is None else copy.deepcopy(self.pools.get(name))

    async def create_inference_pool(self, body: Mapping[str, Any]) -> bool | None:
        self._gate("create")
        if self.pools is None:
            return None
        name = body["metadata"]["name"]
        if name in self.pools:
            return False
        self.pools[name] = {**copy.deepcopy(dict(body)), "metadata": {**body["metadata"], "uid": "pool-uid"}}
        return True

    async def replace_inference_pool_spec(self, namespace: str, name: str, spec: Mapping[str, Any]) -> None:
        self._gate("patch")
        assert self.pools is not None
        self.pools[name]["spec"] = copy.deepcopy(dict(spec))

    async def delete_inference_pool(self, namespace: str, name: str, uid: str) -> bool:
        self._gate("delete")
        assert self.pools is not None
        assert self.pools[name]["metadata"]["uid"] == uid
        del self.pools[name]
        return True

    async def list_pods(self, namespace: str, service: str) -> list[dict[str, Any]]:
        return list(self.pods)

    async def create(self, body: Mapping[str, Any]) -> bool:
        if body["kind"] == "Service":
            self.service = dict(body)
        elif body["kind"] == "NetworkPolicy":
            self.policy = dict(body)
        elif body["kind"] == "PodDisruptionBudget":
            self.pdb = dict(body)
        else:
            self.pods.append({**body, "metadata": {**body["metadata"], "uid": f"pod-{len(self.pods)}"}})
        return True

    async def read_network_policy(self, namespace: str, name: str) -> dict[str, Any] | None:
        return getattr(self, "policy", None)

    async def read_service(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.service

    async def read_pdb(self, namespace: str, name: str) -> dict[str, Any] | None:
        return getattr(self, "pdb", None)

    async def list_mount_failures(self, namespace: str) -> list[dict[str, Any]]:
        return []

    async def patch_service(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        raise AssertionError("the Service never drifts in these tests")

    async def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        return True

    async def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self.status = dict(status)


@pytest.fixture
def routed(example_body: dict[str, Any]) -> ParsedService:
    example_body["spec"]["routing"] = {"inferencePool": {"enabled": True, "endpointPickerRef": PICKER}}
    return parse_resource(example_body)


def _cond(result: Any) -> tuple[str, str, str]:
    (cond,) = result
    return cond[0], cond[1], cond[2]


async def test_creates_the_pool_and_reports_it_synced(routed: ParsedService) -> None:
    kube = FakeKube()
    result = await sync_inference_pool(kube, routed.spec, OWNER, previous=None)
    assert _cond(result) == ("InferencePoolReady", "True", "Synced")
    assert "selects pods inference.ascend.dev/service=dsv4-flash on port 8000" in result[0][3]
    assert kube.pools is not None
    assert kube.pools["dsv4-flash"]["spec"] == build_inference_pool(routed.spec, owner=OWNER)["spec"]
    again = await sync_inference_pool(kube, routed.spec, OWNER, previous=None)
    assert again == result
    assert kube.calls == ["get", "create", "get"]  # in sync: no write


async def test_a_changed_spec_replaces_the_pools_spec(routed: ParsedService, example_body: dict[str, Any]) -> None:
    kube = FakeKube()
    await sync_inference_pool(kube, routed.spec, OWNER, previous=None)
    assert kube.pools is not None
    kube.pools["dsv4-flash"]["spec"]["selector"]["matchLabels"]["stale"] = "x"  # someone edited it
    example_body["spec"]["engine"]["port"] = 8100
    moved = parse_resource(example_body)
    await sync_inference_pool(kube, moved.spec, OWNER, previous=None)
    assert kube.calls[-1] == "patch"
    assert kube.pools["dsv4-flash"]["spec"] == {
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
    result = await sync_inference_pool(FakeKube(crd=False), routed.spec, OWNER, previous=None)
    assert _cond(result) == ("InferencePoolReady", "False", "CRDNotInstalled")
    assert "inferencepools.inference.networking.k8s.io" in result[0][3]


async def test_forbidden_names_the_chart_value(routed: ParsedService) -> None:
    result = await sync_inference_pool(FakeKube(refuse=403), routed.spec, OWNER, previous=None)
    assert _cond(result) == ("InferencePoolReady", "False", "Forbidden")
    assert "routing.inferencePool.enabled=true" in result[0][3]
    assert "inferencepools is forbidden" in result[0][3]


async def test_rejected_pool_carries_the_api_servers_message(routed: ParsedService) -> None:
    result = await sync_inference_pool(FakeKube(refuse=422), routed.spec, OWNER, previous=None)
    assert _cond(result) == ("InferencePoolReady", "False", "Rejected")


async def test_a_pool_someone_else_owns_is_left_alone(routed: ParsedService) -> None:
    kube = FakeKube()
    foreign = build_inference_pool(routed.spec, owner=Owner(name="dsv4-flash", namespace="llm", uid="other"))
    assert kube.pools is not None
    kube.pools["dsv4-flash"] = foreign
    result = await sync_inference_pool(kube, routed.spec, OWNER, previous=None)
    assert _cond(result) == ("InferencePoolReady", "False", "NotOwned")
    assert kube.calls == ["get"]
    assert kube.pools["dsv4-flash"] == foreign


async def test_turning_routing_off_deletes_our_pool_and_drops_the_condition(routed: ParsedService) -> None:
    kube = FakeKube()
    on = await sync_inference_pool(kube, routed.spec, OWNER, previous=None)
    previous = {"conditions": [{"type": on[0][0], "status": on[0][1], "reason": on[0][2], "message": on[0][3]}]}
    unrouted = parse_resource(yaml.safe_load(EXAMPLE.read_text()))
    off = await sync_inference_pool(kube, unrouted.spec, OWNER, previous=previous)
    assert off == ()
    assert kube.pools == {}
    assert kube.calls[-1] == "delete"


async def test_routing_never_on_makes_no_call(example: ParsedService) -> None:
    kube = FakeKube(crd=False)
    assert await sync_inference_pool(kube, example.spec, OWNER, previous=None) == ()
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
    kube = FakeKube(crd=False)
    events: list[tuple[str, str, str]] = []
    body = {
        "apiVersion": "inference.ascend.dev/v1alpha1",
        "kind": "AscendInferenceService",
        "metadata": {"name": "dsv4-flash", "namespace": "llm", "uid": UID, "generation": 1},
        "spec": routed.spec.model_dump(by_alias=True, exclude_none=True, mode="json"),
    }
    ctx = Context(kube=kube, events=lambda *e: events.append(e), now=lambda: "2026-12-01T00:00:00Z")
    status = await reconcile(body, ctx, ServiceMemory())
    assert [p["metadata"]["name"] for p in kube.pods] == ["dsv4-flash-0"]  # the engine is created anyway
    assert kube.service is not None
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
    kube = FakeKube()

    async def timeout(namespace: str, name: str) -> None:
        raise kopf.TemporaryError("no answer from the API server: timed out", delay=5)

    kube.read_inference_pool = timeout  # type: ignore[method-assign]
    result = await sync_inference_pool(kube, routed.spec, OWNER, previous=None)
    assert _cond(result) == ("InferencePoolReady", "Unknown", "Retrying")
    assert "timed out" in result[0][3]


async def test_removal_refused_or_unanswered_stays_pending(routed: ParsedService) -> None:
    unrouted = parse_resource(yaml.safe_load(EXAMPLE.read_text()))
    previous = {"conditions": [{"type": "InferencePoolReady", "status": "True", "reason": "Synced", "message": ""}]}
    refused = await sync_inference_pool(FakeKube(refuse=403), unrouted.spec, OWNER, previous=previous)
    assert _cond(refused) == ("InferencePoolReady", "False", "Forbidden")  # kept, so the next pass retries
    kube = FakeKube()

    async def timeout(namespace: str, name: str) -> None:
        raise kopf.TemporaryError("no answer from the API server: timed out", delay=5)

    kube.read_inference_pool = timeout  # type: ignore[method-assign]
    pending = await sync_inference_pool(kube, unrouted.spec, OWNER, previous=previous)
    assert _cond(pending) == ("InferencePoolReady", "Unknown", "Retrying")


async def test_synced_says_which_gateways_accepted_the_pool(routed: ParsedService) -> None:
    kube = FakeKube()
    await sync_inference_pool(kube, routed.spec, OWNER, previous=None)
    assert kube.pools is not None
    kube.pools["dsv4-flash"]["status"] = {
        "parents": [
            {"parentRef": {"name": "inference-gw"}, "conditions": [{"type": "Accepted", "status": "True"}]},
            {
                "parentRef": {"kind": "Gateway", "namespace": "edge", "name": "other"},
                "conditions": [{"type": "Accepted", "status": "False"}],
            },
        ]
    }
    result = await sync_inference_pool(kube, routed.spec, OWNER, previous=None)
    assert result[0][3].endswith("; accepted by Gateway inference-gw")
    del kube.pools["dsv4-flash"]["status"]
    again = await sync_inference_pool(kube, routed.spec, OWNER, previous=None)
    assert again[0][3].endswith("; no gateway has accepted it yet")
