"""What a cluster admin expects of engine pods: QoS, pull secrets, identity, priority, metadata, the
Service type, and a PodDisruptionBudget that keeps the last serving replica through a drain."""

from typing import Any

import pytest

from ascend_operator.api.parse import parse_spec
from ascend_operator.controller.owned import service_patch
from ascend_operator.render.pod import Owner, build_pdb, build_pod, build_service, owned_by, spec_hash
from ascend_operator.render.resources import build_resources, format_bytes, parse_quantity
from ascend_operator.validation import Severity, validate_spec

OWNER = Owner(name="m", namespace="ns", uid="u-1")
BASE: dict[str, Any] = {
    "image": "img",
    "model": {"path": "/models/m", "servedName": "m", "source": {"hostPath": {"path": "/models/m"}}},
}


def spec_of(**fields: Any) -> Any:
    return parse_spec({**BASE, **fields})


def qos_class(resources: dict[str, dict[str, str]]) -> str:
    """The pod QoS class of a single-container pod, as the API server computes it (pkg/apis/core/helper/qos):
    Guaranteed when cpu and memory limits are set and equal the requests, BestEffort with neither set."""
    req = {k: v for k, v in resources.get("requests", {}).items() if k in ("cpu", "memory")}
    lim = {k: v for k, v in resources.get("limits", {}).items() if k in ("cpu", "memory")}
    if not req and not lim:
        return "BestEffort"
    if set(lim) == {"cpu", "memory"} and all(req.get(k, lim[k]) == lim[k] for k in lim):
        return "Guaranteed"
    return "Burstable"


def test_default_engine_pod_is_burstable_and_counts_shm_into_memory() -> None:
    resources = build_pod(spec_of(), owner=OWNER, replica=0)["spec"]["containers"][0]["resources"]
    assert resources == {
        "requests": {"cpu": "48", "memory": "320Gi", "huawei.com/Ascend910": "8"},
        "limits": {"memory": "320Gi", "huawei.com/Ascend910": "8"},
    }
    assert qos_class(resources) == "Burstable"
    bigger = build_resources(spec_of(runtime={"shmSize": "128Gi"}))
    assert bigger["requests"]["memory"] == bigger["limits"]["memory"] == "384Gi"
    assert parse_quantity(bigger["limits"]["memory"]) <= parse_quantity("502Gi")  # the KWOK Atlas node


@pytest.mark.parametrize(
    ("given", "requests", "limits", "qos"),
    [
        ({"limits": {"cpu": "64", "memory": "400Gi"}}, {}, {"cpu": "64", "memory": "400Gi"}, "Guaranteed"),
        ({"requests": {"memory": "200Gi"}}, {"cpu": "48", "memory": "200Gi"}, {"memory": "200Gi"}, "Burstable"),
        (
            {"requests": {"cpu": "96", "memory": "300Gi"}, "limits": {"memory": "480Gi"}},
            {"cpu": "96", "memory": "300Gi"},
            {"memory": "480Gi"},
            "Burstable",
        ),
    ],
    ids=["limits-only-is-guaranteed", "memory-request-sets-the-limit", "explicit"],
)
def test_given_resources_win_and_the_rest_is_defaulted(
    given: dict[str, Any], requests: dict[str, str], limits: dict[str, str], qos: str
) -> None:
    got = build_resources(spec_of(resources=given))
    npu = {"huawei.com/Ascend910": "8"}
    assert got == {"requests": {**requests, **npu}, "limits": {**limits, **npu}}
    assert qos_class(got) == qos


def test_quantities_parse_and_format() -> None:
    assert parse_quantity("1.5Gi") == 1536 * 2**20
    assert parse_quantity("500m") == parse_quantity("0.5")
    assert format_bytes(parse_quantity("256Gi") + parse_quantity("1000Mi")) == "263144Mi"
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity("lots")


def errors(spec: Any) -> list[str]:
    return [f.rule for f in validate_spec(spec) if f.severity is Severity.ERROR]


def test_a_memory_limit_that_shm_would_fill_is_an_error() -> None:
    assert "ShmWithinMemoryLimit" in errors(spec_of(resources={"limits": {"memory": "64Gi"}}))
    assert "ShmWithinMemoryLimit" in errors(spec_of(resources={"requests": {"memory": "32Gi"}}))
    assert "ShmWithinMemoryLimit" not in errors(spec_of(resources={"limits": {"memory": "65Gi"}}))
    assert "RequestsWithinLimits" in errors(
        spec_of(resources={"requests": {"memory": "400Gi"}, "limits": {"memory": "300Gi"}})
    )


def test_pod_identity_priority_pull_secrets_and_metadata() -> None:
    spec = spec_of(
        imagePullSecrets=[{"name": "registry-cred"}],
        serviceAccountName="engine",
        priorityClassName="inference-critical",
        podMetadata={"labels": {"team": "llm"}, "annotations": {"sidecar.istio.io/inject": "false"}},
    )
    pod = build_pod(spec, owner=OWNER, replica=0)
    assert pod["spec"]["imagePullSecrets"] == [{"name": "registry-cred"}]
    assert pod["spec"]["serviceAccountName"] == "engine"
    assert pod["spec"]["priorityClassName"] == "inference-critical"
    assert pod["metadata"]["labels"]["team"] == "llm"
    assert pod["metadata"]["labels"]["inference.ascend.dev/service"] == "m"
    assert pod["metadata"]["annotations"] == {
        "sidecar.istio.io/inject": "false",
        "inference.ascend.dev/spec-hash": spec_hash(spec),
    }
    # metadata read only at creation (webhooks) rolls the pods; no extra metadata keeps the old digest
    bare = spec.model_copy(update={"pod_metadata": spec_of().pod_metadata})
    assert spec_hash(spec) != spec_hash(bare)
    assert "imagePullSecrets" not in build_pod(spec_of(), owner=OWNER, replica=0)["spec"]


def test_pod_labels_may_not_take_the_operators_own() -> None:
    assert "OperatorLabelsReserved" in errors(spec_of(podMetadata={"labels": {"inference.ascend.dev/service": "x"}}))
    assert "OperatorLabelsReserved" in errors(spec_of(podMetadata={"labels": {"app.kubernetes.io/instance": "x"}}))
    assert "OperatorLabelsReserved" not in errors(spec_of(podMetadata={"labels": {"app.kubernetes.io/part-of": "x"}}))


def test_service_type_and_annotations() -> None:
    svc = build_service(
        spec_of(service={"type": "LoadBalancer", "annotations": {"lb.example.com/internal": "true"}}), owner=OWNER
    )
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["metadata"]["annotations"] == {"lb.example.com/internal": "true"}


def test_disruption_budget_keeps_the_last_serving_replica() -> None:
    assert build_pdb(spec_of(), owner=OWNER) == {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": "m",
            "namespace": "ns",
            "labels": {
                "app.kubernetes.io/name": "ascend-inference",
                "app.kubernetes.io/instance": "m",
                "app.kubernetes.io/component": "engine",
                "app.kubernetes.io/managed-by": "ascend-inference-operator",
                "inference.ascend.dev/service": "m",
            },
            "ownerReferences": [
                {
                    "apiVersion": "inference.ascend.dev/v1alpha1",
                    "kind": "AscendInferenceService",
                    "name": "m",
                    "uid": "u-1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": {"inference.ascend.dev/service": "m"}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
    assert build_pdb(spec_of(disruptionBudget={"minAvailable": 2}), owner=OWNER)["spec"]["minAvailable"] == 2  # type: ignore[index]
    assert build_pdb(spec_of(disruptionBudget={"enabled": False}), owner=OWNER) is None
    # a group needs all its pods; a per-pod budget would let a drain take one worker and the group with it
    assert build_pdb(spec_of(parallelism={"nodes": 2, "tensor": 8, "data": 2}), owner=OWNER) is None


def test_service_patch_only_for_what_the_spec_decides() -> None:
    desired = build_service(spec_of(service={"type": "NodePort", "annotations": {"a": "1"}}), owner=OWNER)
    live = {
        "metadata": {"annotations": {"a": "1", "someone.else/x": "y"}},
        "spec": {
            "type": "NodePort",
            "selector": {"inference.ascend.dev/service": "m"},
            "ports": [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP", "nodePort": 30080}],
            "clusterIP": "10.96.0.10",
        },
    }
    assert service_patch(live, desired) == {}
    clusterip = build_service(spec_of(), owner=OWNER)
    assert service_patch(live, clusterip) == {"spec": {k: clusterip["spec"][k] for k in ("selector", "ports", "type")}}
    relabelled = build_service(spec_of(service={"type": "NodePort", "annotations": {"a": "2"}}), owner=OWNER)
    assert service_patch(live, relabelled) == {"metadata": {"annotations": {"a": "2"}}}


def test_only_an_owned_budget_counts_as_ours() -> None:
    ours = build_pdb(spec_of(), owner=OWNER)
    assert ours is not None
    assert owned_by(ours, OWNER)
    assert not owned_by({"metadata": {"name": "m"}}, OWNER)
