"""The API key, the NetworkPolicy and the hardened container a user gets from a spec, as whole objects."""

from typing import Any

import pytest

from ascend_operator.api.parse import ParsedService, parse_spec
from ascend_operator.render.env import build_env
from ascend_operator.render.netpol import OperatorPeer, build_network_policy
from ascend_operator.render.pod import Owner, build_pod, security_context, spec_hash
from ascend_operator.validation import Severity, validate_spec

OWNER = Owner(name="dsv4-flash", namespace="llm", uid="3f1c7f9e-0000-4000-8000-000000000001")
OPERATOR = OperatorPeer(namespace="ascend-system", pod_labels={"app.kubernetes.io/name": "ascend-inference-operator"})
KEY_REF = {"name": "ascend-engine-api-key", "key": "token"}
SECRET_ENV = {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "ascend-engine-api-key", "key": "token"}}}


def _spec(example: ParsedService, **fields: Any) -> Any:
    return parse_spec({**example.spec.model_dump(by_alias=True, exclude_none=True), **fields})


def test_api_key_reaches_the_engine_only_through_a_secret_key_ref(example: ParsedService) -> None:
    spec = _spec(example, auth={"apiKeySecretRef": KEY_REF})
    env = build_env(spec)
    assert env[-1] == SECRET_ENV
    assert env[:-1] == build_env(example.spec)  # the profile is unchanged
    container = build_pod(spec, owner=OWNER, replica=0)["spec"]["containers"][0]
    flat = " ".join(container["args"] + container["readinessProbe"]["exec"]["command"])
    assert "api-key" not in flat
    assert "VLLM_API_KEY" in container["readinessProbe"]["exec"]["command"][2]  # the probe reads its env


def test_without_a_key_the_engine_gets_no_key_variable(example: ParsedService) -> None:
    assert all(var["name"] != "VLLM_API_KEY" for var in build_env(example.spec))


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"engine": {"extraArgs": ["--api-key", "s3cret"]}}, "ApiKeyNotInArgs"),
        ({"engine": {"extraArgs": ["--api_key=s3cret"]}}, "ApiKeyNotInArgs"),
        ({"env": [{"name": "VLLM_API_KEY", "value": "s3cret"}]}, "ApiKeyNotInEnv"),
    ],
)
def test_a_literal_key_in_args_or_env_is_refused(example: ParsedService, fields: dict[str, Any], rule: str) -> None:
    body = example.spec.model_dump(by_alias=True, exclude_none=True)
    for key, value in fields.items():
        body[key] = {**body[key], **value} if isinstance(value, dict) else value
    findings = validate_spec(parse_spec(body))
    assert [(f.severity, f.rule) for f in findings if f.severity is Severity.ERROR] == [(Severity.ERROR, rule)]


def test_network_policy_admits_namespace_clients_operator_and_monitoring(example: ParsedService) -> None:
    spec = _spec(
        example,
        networkPolicy={
            "clients": [{"namespace": "gateway", "podLabels": {"app": "envoy"}}, {"namespace": "batch"}],
            "monitoringNamespaces": ["monitoring"],
        },
    )
    port = [{"protocol": "TCP", "port": 8000}]

    def ns(name: str) -> dict[str, Any]:
        return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}

    assert build_network_policy(spec, owner=OWNER, operator=OPERATOR) == {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": "dsv4-flash",
            "namespace": "llm",
            "labels": {
                "app.kubernetes.io/name": "ascend-inference",
                "app.kubernetes.io/instance": "dsv4-flash",
                "app.kubernetes.io/component": "engine",
                "app.kubernetes.io/managed-by": "ascend-inference-operator",
                "inference.ascend.dev/service": "dsv4-flash",
            },
            "ownerReferences": [
                {
                    "apiVersion": "inference.ascend.dev/v1alpha1",
                    "kind": "AscendInferenceService",
                    "name": "dsv4-flash",
                    "uid": "3f1c7f9e-0000-4000-8000-000000000001",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "podSelector": {"matchLabels": {"inference.ascend.dev/service": "dsv4-flash"}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {"podSelector": {}},
                        {**ns("gateway"), "podSelector": {"matchLabels": {"app": "envoy"}}},
                        ns("batch"),
                        {
                            **ns("ascend-system"),
                            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "ascend-inference-operator"}},
                        },
                    ],
                    "ports": port,
                },
                {"from": [{"podSelector": {"matchLabels": {"inference.ascend.dev/service": "dsv4-flash"}}}]},
                {"from": [ns("monitoring")], "ports": port},
            ],
        },
    }


def test_default_policy_is_on_and_without_same_namespace_only_the_operator_reaches_the_port(
    example: ParsedService,
) -> None:
    default = build_network_policy(example.spec, owner=OWNER, operator=OPERATOR)
    assert default is not None
    assert default["spec"]["ingress"][0]["from"][0] == {"podSelector": {}}
    closed = build_network_policy(
        _spec(example, networkPolicy={"allowSameNamespace": False}), owner=OWNER, operator=OPERATOR
    )
    assert closed is not None
    assert [p["namespaceSelector"]["matchLabels"] for p in closed["spec"]["ingress"][0]["from"]] == [
        {"kubernetes.io/metadata.name": "ascend-system"}
    ]
    assert (
        build_network_policy(_spec(example, networkPolicy={"enabled": False}), owner=OWNER, operator=OPERATOR) is None
    )


def test_read_only_root_gets_an_empty_dir_on_every_path_the_engine_writes(example: ParsedService) -> None:
    spec = _spec(example, runtime={"readOnlyRootFilesystem": True, "capabilities": []})
    pod = build_pod(spec, owner=OWNER, replica=0)["spec"]
    writable = {"tmp": "/tmp", "home-cache": "/root/.cache", "home-triton": "/root/.triton"}
    writable |= {"home-ascend": "/root/ascend", "workspace": "/workspace"}
    assert [v for v in pod["volumes"] if "emptyDir" in v and v["name"] != "dshm"] == [
        {"name": name, "emptyDir": {}} for name in writable
    ]
    mounts = pod["containers"][0]["volumeMounts"]
    assert [m for m in mounts if m["name"] in writable] == [{"name": n, "mountPath": p} for n, p in writable.items()]
    assert security_context(spec) == {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    default_mounts = build_pod(example.spec, owner=OWNER, replica=0)["spec"]["containers"][0]["volumeMounts"]
    assert not {m["name"] for m in default_mounts} & set(writable)


def test_a_rotated_key_secret_changes_the_pod_hash_without_the_key_in_it(example: ParsedService) -> None:
    # env from a secretKeyRef is read at container start: a new Secret version must replace the engines
    spec = _spec(example, auth={"apiKeySecretRef": KEY_REF})
    before = build_pod(spec, owner=OWNER, replica=0, key_version="100")
    after = build_pod(spec, owner=OWNER, replica=0, key_version="101")
    assert before["spec"] == after["spec"]
    hashes = {p["metadata"]["annotations"]["inference.ascend.dev/spec-hash"] for p in (before, after)}
    assert len(hashes) == 2
    assert spec_hash(example.spec) == spec_hash(example.spec, key_version=None)  # no key: the old hash
