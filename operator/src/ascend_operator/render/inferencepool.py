"""The InferencePool a service owns when `spec.routing.inferencePool.enabled`: a pure builder.

A Gateway API Inference Extension gateway routes to the pool's pods through the endpoint picker, so the
pool must select exactly this service's engine pods on the engine port. It selects on the same labels as
the Service (`serving_selector`), which every engine pod carries from creation: a replacement pod after a
roll or a scale-up is a member as soon as it exists, and readiness (the operator's gate) decides whether
the picker sends it traffic, exactly as for the Service's endpoints.

Every field the API server would default is written out (endpointPickerRef group "" and kind Service,
inferencepool_types.go:101-122), so the stored spec equals the built one and drift is a plain comparison.
Field names and limits: GIE v1.0.0 api/v1/inferencepool_types.go:59-145 (spec: selector, targetPorts with
exactly one port, endpointPickerRef) and shared_types.go:132-143 (selector: matchLabels only).
"""

from typing import Any

from ascend_operator.api.constants import POOL_API_VERSION, POOL_KIND
from ascend_operator.api.inference_pool import EndpointPickerRef
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.render.pod import Owner, common_labels, owner_metadata, serving_selector


def pool_name(owner: Owner) -> str:
    """The pool is named like the service (a different kind, so it never clashes with the Service)."""
    return owner.name


def build_endpoint_picker_ref(ref: EndpointPickerRef) -> dict[str, Any]:
    """GIE's endpointPickerRef with the API server's defaults explicit."""
    return {
        "group": "",
        "kind": "Service",
        "name": ref.name,
        "port": {"number": ref.port.number},
        "failureMode": ref.failure_mode.value,
    }


def build_inference_pool_spec(spec: AscendInferenceServiceSpec, *, owner: Owner) -> dict[str, Any]:
    """The pool's `spec`; requires an endpoint picker (the InferencePoolNeedsEndpointPicker rule)."""
    ref = spec.routing.inference_pool.endpoint_picker_ref
    if ref is None:
        raise ValueError("spec.routing.inferencePool.endpointPickerRef is required when the pool is enabled")
    return {
        "selector": {"matchLabels": serving_selector(spec, owner)},
        "targetPorts": [{"number": spec.engine.port}],
        "endpointPickerRef": build_endpoint_picker_ref(ref),
    }


def build_inference_pool(spec: AscendInferenceServiceSpec, *, owner: Owner) -> dict[str, Any]:
    """The whole InferencePool object (owner reference included when the service's uid is known)."""
    return {
        "apiVersion": POOL_API_VERSION,
        "kind": POOL_KIND,
        "metadata": {
            "name": pool_name(owner),
            "namespace": owner.namespace,
            "labels": common_labels(owner),
            **owner_metadata(owner),
        },
        "spec": build_inference_pool_spec(spec, owner=owner),
    }
