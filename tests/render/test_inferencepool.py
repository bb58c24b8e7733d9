"""The InferencePool a user gets with spec.routing.inferencePool: the object, its selector, its rule, render.

Why it exists: a gateway routes only to what the pool selects, so the selector must be exactly this
service's engine pods (every pod the operator creates, no pod of another service) on the engine port,
and the endpoint picker reference must come out in GIE v1's shape with the API server's defaults
written out (the reconcile step compares the stored spec with the built one).
"""

from typing import Any

import pytest
import yaml

from ascend_operator.api.parse import ParsedService, SpecError, parse_resource
from ascend_operator.crd import build_crd
from ascend_operator.render.inferencepool import build_inference_pool
from ascend_operator.render.pod import Owner, build_pod, build_service
from ascend_operator.validation import Severity, validate_spec
from tests.cli.test_cli import aisctl
from tests.fixtures.examples import EXAMPLE
from tests.render.test_render import LABELS, OWNER, OWNER_REFS

PICKER = {"name": "dsv4-flash-epp", "port": {"number": 9002}}


def _routed(body: dict[str, Any], **pool: Any) -> ParsedService:
    body["spec"]["routing"] = {"inferencePool": {"enabled": True, "endpointPickerRef": PICKER, **pool}}
    return parse_resource(body)


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_pool_is_exactly_the_gie_v1_object(example_body: dict[str, Any]) -> None:
    parsed = _routed(example_body)
    assert build_inference_pool(parsed.spec, owner=OWNER) == {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {
            "name": "dsv4-flash",
            "namespace": "llm",
            "labels": LABELS,
            "ownerReferences": OWNER_REFS,
        },
        "spec": {
            "selector": {"matchLabels": {"inference.ascend.dev/service": "dsv4-flash"}},
            "targetPorts": [{"number": 8000}],
            "endpointPickerRef": {
                "group": "",
                "kind": "Service",
                "name": "dsv4-flash-epp",
                "port": {"number": 9002},
                "failureMode": "FailClose",
            },
        },
    }


def test_pool_follows_the_engine_port_and_failure_mode(example_body: dict[str, Any]) -> None:
    example_body["spec"]["engine"]["port"] = 8100
    parsed = _routed(example_body, endpointPickerRef={**PICKER, "failureMode": "FailOpen"})
    spec = build_inference_pool(parsed.spec, owner=OWNER)["spec"]
    assert spec["targetPorts"] == [{"number": 8100}]
    assert spec["endpointPickerRef"]["failureMode"] == "FailOpen"
    # the Service and the pods serve on the same port the pool targets
    assert build_service(parsed.spec, owner=OWNER)["spec"]["ports"][0]["port"] == 8100
    assert build_pod(parsed.spec, owner=OWNER, replica=0)["spec"]["containers"][0]["ports"][0]["containerPort"] == 8100


def test_selector_matches_every_replica_and_no_other_service(example_body: dict[str, Any]) -> None:
    example_body["spec"]["replicas"] = 3
    parsed = _routed(example_body)
    selector = build_inference_pool(parsed.spec, owner=OWNER)["spec"]["selector"]["matchLabels"]
    ours = [build_pod(parsed.spec, owner=OWNER, replica=i)["metadata"]["labels"] for i in range(3)]
    assert all(_matches(selector, labels) for labels in ours)
    # the Service selects the same pods: one definition of "this service's engine pods"
    assert build_service(parsed.spec, owner=OWNER)["spec"]["selector"] == selector
    other = Owner(name="dsv4-flash-b", namespace="llm", uid="u2")
    assert not _matches(selector, build_pod(parsed.spec, owner=other, replica=0)["metadata"]["labels"])


def test_offline_render_has_no_owner_reference(example_body: dict[str, Any]) -> None:
    parsed = _routed(example_body)
    pool = build_inference_pool(parsed.spec, owner=Owner(name="dsv4-flash", namespace="default"))
    assert "ownerReferences" not in pool["metadata"]


def test_routing_is_off_by_default(example: ParsedService) -> None:
    assert example.spec.routing.inference_pool.enabled is False
    assert example.spec.routing.inference_pool.endpoint_picker_ref is None


def test_enabled_without_endpoint_picker_is_an_error_with_its_cel_twin(example_body: dict[str, Any]) -> None:
    example_body["spec"]["routing"] = {"inferencePool": {"enabled": True}}
    findings = validate_spec(parse_resource(example_body).spec)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    assert [f.rule for f in errors] == ["InferencePoolNeedsEndpointPicker"]
    assert errors[0].field == "spec.routing.inferencePool.endpointPickerRef"
    pool_schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    pool_schema = pool_schema["properties"]["routing"]["properties"]["inferencePool"]
    (rule,) = pool_schema["x-kubernetes-validations"]
    assert rule["rule"] == "!has(self.enabled) || !self.enabled || has(self.endpointPickerRef)"
    assert rule["fieldPath"] == ".endpointPickerRef"


@pytest.mark.parametrize(
    ("ref", "problem"),
    [
        ({"name": "", "port": {"number": 9002}}, "spec.routing.inferencePool.endpointPickerRef.name"),
        ({"name": "epp", "port": {"number": 0}}, "spec.routing.inferencePool.endpointPickerRef.port.number"),
        ({"name": "epp"}, "spec.routing.inferencePool.endpointPickerRef.port"),
        ({"name": "epp", "port": {"number": 9002}, "failureMode": "Maybe"}, "failureMode"),
        ({"name": "epp", "port": {"number": 9002}, "kind": "Deployment"}, "kind"),
    ],
    ids=["empty-name", "port-0", "no-port", "bad-failure-mode", "only-services"],
)
def test_endpoint_picker_ref_keeps_gie_limits(example_body: dict[str, Any], ref: dict[str, Any], problem: str) -> None:
    example_body["spec"]["routing"] = {"inferencePool": {"enabled": True, "endpointPickerRef": ref}}
    with pytest.raises(SpecError) as err:
        parse_resource(example_body)
    assert any(problem in p for p in err.value.problems), err.value.problems


def test_render_prints_the_pool_last_only_when_enabled() -> None:
    body = yaml.safe_load(EXAMPLE.read_text())
    plain = [d["kind"] for d in yaml.safe_load_all(aisctl("render", "-f", str(EXAMPLE)).stdout)]
    assert plain == ["NetworkPolicy", "Pod", "Service", "PodDisruptionBudget"]
    body["spec"]["routing"] = {"inferencePool": {"enabled": True, "endpointPickerRef": PICKER}}
    result = aisctl("render", "-f", "-", stdin=yaml.safe_dump(body))
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == ["NetworkPolicy", "Pod", "Service", "PodDisruptionBudget", "InferencePool"]
    assert docs[4]["spec"]["selector"]["matchLabels"] == docs[2]["spec"]["selector"]
    body["spec"]["routing"] = {"inferencePool": {"enabled": True}}
    refused = aisctl("render", "-f", "-", stdin=yaml.safe_dump(body))
    assert refused.returncode == 2
    assert "[InferencePoolNeedsEndpointPicker]" in refused.stderr
