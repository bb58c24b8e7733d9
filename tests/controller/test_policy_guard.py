"""A new service's pods are created beside their NetworkPolicy, and a policy that cannot be made takes them
with it (controller/engines.py `guarded_apply`).

Why it exists: the pod create no longer waits for the policy's (issue 14: a new service's pod bound within
1.5x a direct create), and that must not open a way to an unguarded engine: a refused policy deletes the
pods of that pass, says so in an event naming the pod and the policy, and later passes make the policy
first, so a refusal costs one pod, not one per retry.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ascend_operator.api.parse import ParsedService
from ascend_operator.clients.kube import ApiRefused
from ascend_operator.controller.reconcile import Context, reconcile
from ascend_operator.controller.service_state import ServiceMemory
from tests.controller.test_routing import UID
from tests.fixtures.kube import Call, FakeKube

REFUSAL = '{"kind":"Status","message":"networkpolicies.networking.k8s.io is forbidden"}'


def cluster(*, refuse_policy: bool = False, hold_policy: bool = False) -> FakeKube:
    """An API server whose NetworkPolicy create is refused (twice: two passes), or answered only once the
    pod create was sent."""
    kube = FakeKube()
    if refuse_policy:
        kube.fail("create", "NetworkPolicy", lambda: ApiRefused(403, "Forbidden", REFUSAL), times=2)
    if hold_policy:
        pod_sent = asyncio.Event()

        async def note_pod(call: Call) -> None:
            pod_sent.set()

        async def hold(call: Call) -> None:
            await asyncio.wait_for(pod_sent.wait(), timeout=5)

        kube.before("create", "Pod", note_pod)
        kube.before("create", "NetworkPolicy", hold)
    return kube


def created(kube: FakeKube) -> list[str]:
    """The kinds of the create requests, in the order they were sent."""
    return [c.kind for c in kube.requests("create") if c.kind in ("Pod", "NetworkPolicy")]


def pods(kube: FakeKube) -> list[str]:
    return [p["metadata"]["name"] for p in kube.of_kind("Pod", "llm") if not p["metadata"].get("deletionTimestamp")]


def _body(example: ParsedService) -> dict[str, Any]:
    return {
        "apiVersion": "inference.ascend.dev/v1alpha1",
        "kind": "AscendInferenceService",
        "metadata": {"name": "dsv4-flash", "namespace": "llm", "uid": UID, "generation": 1},
        "spec": example.spec.model_dump(by_alias=True, exclude_none=True, mode="json"),
    }


def _ctx(kube: FakeKube, events: list[tuple[str, str, str]]) -> Context:
    return Context(kube=kube, events=lambda *e: events.append(e), now=lambda: "2026-12-01T00:00:00Z")


async def test_the_pod_create_does_not_wait_for_the_policy(example: ParsedService) -> None:
    # the policy create returns only after the pod create was called: a pass that waited for the policy
    # before creating pods would time out here
    kube = cluster(hold_policy=True)
    await reconcile(_body(example), _ctx(kube, []), ServiceMemory())
    assert created(kube) == ["Pod", "NetworkPolicy"]
    assert pods(kube) == ["dsv4-flash-0"]
    assert kube.obj("NetworkPolicy", "dsv4-flash", "llm") is not None


async def test_the_pod_create_is_sent_before_the_policy_create(example: ParsedService) -> None:
    # the pod create is the new service's latency (issue 14): it goes out in the pass's own task, not
    # behind a policy task that a busy loop runs first
    kube = cluster()
    await reconcile(_body(example), _ctx(kube, []), ServiceMemory())
    assert created(kube) == ["Pod", "NetworkPolicy"]


async def test_a_refused_policy_takes_the_new_pod_with_it_and_later_passes_make_no_pod(
    example: ParsedService,
) -> None:
    kube = cluster(refuse_policy=True)
    events: list[tuple[str, str, str]] = []
    memory = ServiceMemory()
    with pytest.raises(ApiRefused):
        await reconcile(_body(example), _ctx(kube, events), memory)
    assert pods(kube) == []
    assert [c.name for c in kube.requests("delete", kind="Pod")] == ["dsv4-flash-0"]
    assert kube.finish_terminating() == ["dsv4-flash-0"]
    (warning,) = [e for e in events if e[1] == "NetworkPolicyFailed"]
    assert warning[0] == "Warning"
    assert warning[2] == (
        "deleted pod dsv4-flash-0: its NetworkPolicy dsv4-flash could not be made: "
        "networkpolicies.networking.k8s.io is forbidden"
    )

    # still refused: the policy goes first now, so no pod is created (and none deleted) per retry
    kube.calls.clear()
    with pytest.raises(ApiRefused):
        await reconcile(_body(example), _ctx(kube, events), memory)
    assert created(kube) == ["NetworkPolicy"]
    assert pods(kube) == []
    assert kube.requests("delete") == []

    # allowed again (the chart's RBAC fixed): the policy, then the pod, and overlapping from then on
    kube.calls.clear()
    await reconcile(_body(example), _ctx(kube, events), memory)
    assert created(kube) == ["NetworkPolicy", "Pod"]
    assert pods(kube) == ["dsv4-flash-0"]
    assert memory.policy_failed is False
