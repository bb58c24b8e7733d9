"""The operator's one Kubernetes client (clients/kube.py) against the real API server: the answers the
reconcile steps rely on, verb by verb.

Why here and not with the test double: tests/fixtures/kube.py promises to answer as the API server does
(409 on a second create is False, a stale resourceVersion or a wrong uid is "moved on", a strategic merge
of a pod's conditions merges by type, a JSON merge patch replaces lists, a kind not served is
`NotServed`); this test holds the real one to the same promises, so the unit tests built on the double
cannot pass on a kinder world.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import config

from ascend_operator.api.constants import LABEL_SERVICE
from ascend_operator.clients import resources
from ascend_operator.clients.kube import KubeApi, NotServed
from ascend_operator.clients.resources import EVENT, PDB, POD, Resource, service_pods

WIDGET = Resource("Widget", "nothing.example.com", "v1", "widgets", frozenset({"create", "get"}))


def _client(kubeconfig: Path) -> KubeApi:
    return KubeApi(config.new_client_from_config(config_file=str(kubeconfig)))  # type: ignore[no-untyped-call]


def _budget(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "svc", "namespace": namespace, "labels": {LABEL_SERVICE: "svc"}},
        "spec": {"selector": {"matchLabels": {LABEL_SERVICE: "svc"}}, "minAvailable": 1},
    }


def _pod(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {LABEL_SERVICE: "svc"}},
        "spec": {
            "containers": [{"name": "engine", "image": "registry.invalid/engine:1"}],
            "nodeSelector": {"no-such-node": "true"},  # stays Pending: no kubelet acts on it
            "readinessGates": [{"conditionType": "inference.ascend.dev/engine-ready"}],
        },
    }


async def test_create_get_list_patch_delete_answer_as_the_reconcile_steps_expect(
    kubeconfig: Path, namespace: str
) -> None:
    kube = _client(kubeconfig)
    assert await kube.create(_budget(namespace)) is True
    assert await kube.create(_budget(namespace)) is False  # a retried create
    found = await kube.get(PDB, namespace, "svc")
    assert found is not None
    assert found["spec"]["minAvailable"] == 1
    assert await kube.get(PDB, namespace, "other") is None

    version = found["metadata"]["resourceVersion"]
    patched = await kube.patch(PDB, namespace, "svc", {"metadata": {"annotations": {"a": "1"}}})
    assert patched is not None
    assert patched["metadata"]["annotations"] == {"a": "1"}
    stale = {"metadata": {"annotations": {"a": "2"}}}
    assert await kube.patch(PDB, namespace, "svc", stale, resource_version=version) is None  # 409
    assert await kube.patch(PDB, namespace, "gone", stale) is None  # 404
    # a JSON patch (what the InferencePool's spec replacement sends)
    replaced = await kube.patch(PDB, namespace, "svc", [{"op": "replace", "path": "/spec/minAvailable", "value": 2}])
    assert replaced is not None
    assert replaced["spec"]["minAvailable"] == 2

    uid = replaced["metadata"]["uid"]
    assert await kube.delete(PDB, namespace, "svc", uid="someone-else") is False  # uid precondition: 409
    assert await kube.delete(PDB, namespace, "svc", uid=uid) is True
    assert await kube.delete(PDB, namespace, "svc") is False  # gone already
    assert await kube.get(PDB, namespace, "svc") is None
    with pytest.raises(ValueError, match="patch on events is not in its row"):
        await kube.patch(EVENT, namespace, "e", {})  # the operator only lists events: nor may it do more


async def test_pod_status_conditions_merge_by_type_and_lists_select_by_label(kubeconfig: Path, namespace: str) -> None:
    kube = _client(kubeconfig)
    for name in ("svc-0", "svc-1"):
        assert await kube.create(_pod(namespace, name))
    assert sorted(p["metadata"]["name"] for p in await service_pods(kube, namespace, "svc")) == ["svc-0", "svc-1"]
    assert await kube.list(POD, namespace, labels={LABEL_SERVICE: "other"}) == []

    gate = {"type": "inference.ascend.dev/engine-ready", "status": "False", "reason": "Loading", "message": "x"}
    other = {"type": "example.com/other", "status": "True", "reason": "Set", "message": "y"}
    first = await kube.patch(POD, namespace, "svc-0", {"status": {"conditions": [gate, other]}}, status=True)
    assert first is not None
    flipped = {"status": {"conditions": [{**gate, "status": "True", "reason": "Ready"}]}}
    again = await kube.patch(POD, namespace, "svc-0", flipped, status=True)
    assert again is not None
    conditions = {c["type"]: (c["status"], c["reason"]) for c in again["status"]["conditions"]}
    assert conditions[gate["type"]] == ("True", "Ready")  # merged by type, not appended
    assert conditions[other["type"]] == ("True", "Set")  # the others kept
    assert len(again["status"]["conditions"]) == len(conditions)
    both = {"metadata": {"annotations": {"b": "1"}}, "status": {"phase": "X"}}
    plain = await kube.patch(POD, namespace, "svc-0", both)
    assert plain is not None
    assert plain["status"].get("phase") != "X"  # the status is a subresource

    events = await kube.list(EVENT, namespace, fields="involvedObject.kind=Pod,reason=FailedMount")
    assert events == []
    assert await kube.delete(POD, namespace, "svc-1", uid=again["metadata"]["uid"]) is False  # svc-0's uid
    assert await kube.delete(POD, namespace, "svc-1", grace_seconds=5) is True


async def test_a_kind_the_api_server_does_not_serve_is_not_served(
    kubeconfig: Path, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(resources.BY_KIND, WIDGET.kind, WIDGET)
    kube = _client(kubeconfig)
    body = {"apiVersion": "nothing.example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": namespace}}
    with pytest.raises(NotServed, match=r"widgets\.nothing\.example\.com"):
        await kube.create(body)
    assert await kube.get(WIDGET, namespace, "w") is None
    with pytest.raises(ValueError, match="delete on widgets is not in its row"):
        await kube.delete(WIDGET, namespace, "w")
