"""A new service's pods are created beside their NetworkPolicy, and a policy that cannot be made takes them
with it (controller/reconcile.py `_guarded_apply`).

Why it exists: the pod create no longer waits for the policy's (issue 14: a new service's pod bound within
1.5x a direct create), and that must not open a way to an unguarded engine: a refused policy deletes the
pods of that pass, says so in an event naming the pod and the policy, and later passes make the policy
first, so a refusal costs one pod, not one per retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from ascend_operator.api.parse import ParsedService
from ascend_operator.clients.kube import ApiRefused
from ascend_operator.controller.memory import ServiceMemory
from ascend_operator.controller.reconcile import Context, reconcile
from tests.unit.test_routing import UID, FakeKube

REFUSAL = '{"kind":"Status","message":"networkpolicies.networking.k8s.io is forbidden"}'


class PolicyKube(FakeKube):
    """FakeKube whose NetworkPolicy create can be refused or held until the pod create was called."""

    def __init__(self, *, refuse_policy: bool = False, hold_policy: bool = False) -> None:
        super().__init__()
        self.refuse_policy = refuse_policy
        self.hold_policy = hold_policy
        self.pod_created = asyncio.Event()
        self.deleted: list[str] = []
        self.order: list[str] = []
        self.started: list[str] = []

    async def create(self, body: Mapping[str, Any]) -> bool:
        self.started.append(body["kind"])
        if body["kind"] == "NetworkPolicy":
            if self.hold_policy:
                await asyncio.wait_for(self.pod_created.wait(), timeout=5)
            self.order.append("NetworkPolicy")
            if self.refuse_policy:
                raise ApiRefused(403, "Forbidden", REFUSAL)
        made = await super().create(body)
        if body["kind"] == "Pod":
            self.order.append("Pod")
            self.pod_created.set()
        return made

    async def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        self.deleted.append(name)
        self.pods = [p for p in self.pods if p["metadata"]["uid"] != uid]
        return True


def _body(example: ParsedService) -> dict[str, Any]:
    return {
        "apiVersion": "inference.ascend.dev/v1alpha1",
        "kind": "AscendInferenceService",
        "metadata": {"name": "dsv4-flash", "namespace": "llm", "uid": UID, "generation": 1},
        "spec": example.spec.model_dump(by_alias=True, exclude_none=True, mode="json"),
    }


def _ctx(kube: FakeKube, events: list[tuple[str, str, str]]) -> Context:
    return Context(kube=kube, events=lambda *e: events.append(e), now=lambda: "2026-12-01T00:00:00Z")  # type: ignore[arg-type]


async def test_the_pod_create_does_not_wait_for_the_policy(example: ParsedService) -> None:
    # the policy create returns only after the pod create was called: a pass that waited for the policy
    # before creating pods would time out here
    kube = PolicyKube(hold_policy=True)
    await reconcile(_body(example), _ctx(kube, []), ServiceMemory())
    assert kube.order == ["Pod", "NetworkPolicy"]
    assert [p["metadata"]["name"] for p in kube.pods] == ["dsv4-flash-0"]
    assert getattr(kube, "policy", None) is not None


async def test_the_pod_create_is_sent_before_the_policy_create(example: ParsedService) -> None:
    # the pod create is the new service's latency (issue 14): it goes out in the pass's own task, not
    # behind a policy task that a busy loop runs first
    kube = PolicyKube()
    await reconcile(_body(example), _ctx(kube, []), ServiceMemory())
    assert kube.started[:2] == ["Pod", "NetworkPolicy"]


async def test_a_refused_policy_takes_the_new_pod_with_it_and_later_passes_make_no_pod(
    example: ParsedService,
) -> None:
    kube = PolicyKube(refuse_policy=True)
    events: list[tuple[str, str, str]] = []
    memory = ServiceMemory()
    with pytest.raises(ApiRefused):
        await reconcile(_body(example), _ctx(kube, events), memory)
    assert kube.pods == []
    assert kube.deleted == ["dsv4-flash-0"]
    (warning,) = [e for e in events if e[1] == "NetworkPolicyFailed"]
    assert warning[0] == "Warning"
    assert warning[2] == (
        "deleted pod dsv4-flash-0: its NetworkPolicy dsv4-flash could not be made: "
        "networkpolicies.networking.k8s.io is forbidden"
    )

    # still refused: the policy goes first now, so no pod is created (and none deleted) per retry
    kube.order.clear()
    with pytest.raises(ApiRefused):
        await reconcile(_body(example), _ctx(kube, events), memory)
    assert kube.order == ["NetworkPolicy"]
    assert kube.pods == []
    assert kube.deleted == ["dsv4-flash-0"]

    # allowed again (the chart's RBAC fixed): the policy, then the pod, and overlapping from then on
    kube.refuse_policy = False
    kube.order.clear()
    await reconcile(_body(example), _ctx(kube, events), memory)
    assert kube.order == ["NetworkPolicy", "Pod"]
    assert [p["metadata"]["name"] for p in kube.pods] == ["dsv4-flash-0"]
    assert memory.policy_failed is False
