"""How clients reach a service's engines besides its Service: an InferencePool for the Gateway API
Inference Extension (GIE), so a prefix-cache and queue aware endpoint picker can route to them.

The field shapes follow GIE v1 (`sigs.k8s.io/gateway-api-inference-extension` v1.0.0, api/v1), so a user
who knows that API recognises them and the operator can pass them through unchanged:
- `endpointPickerRef` is GIE's `EndpointPickerRef` (inferencepool_types.go:97-145) reduced to a Service
  reference: `name` (ObjectName, 1-253 characters, shared_types.go:56-62) and `port: {number}` (`Port`,
  inferencepool_types.go:88-95, `PortNumber` 1-65535, shared_types.go:85-89), which GIE's own CEL rule
  requires when the kind is Service (inferencepool_types.go:99); `failureMode` is GIE's enum
  (FailOpen / FailClose, inferencepool_types.go:147-160).
Only the endpoint picker is the user's to choose: the selector and target port are the operator's
(the service's engine pods on the engine port), which is what keeps the pool in step with the pods.
"""

from enum import StrEnum

from pydantic import Field

from ascend_operator.api.base import ApiModel


class FailureMode(StrEnum):
    """What the gateway does when the endpoint picker does not answer (GIE's EndpointPickerFailureMode)."""

    FAIL_OPEN = "FailOpen"
    FAIL_CLOSE = "FailClose"


class PortNumber(ApiModel):
    """A port, as GIE's `Port` spells it."""

    number: int = Field(ge=1, le=65535, description="Port number of the endpoint picker's Service.")


class EndpointPickerRef(ApiModel):
    """The endpoint picker (EPP) Service the pool hands routing decisions to."""

    name: str = Field(min_length=1, max_length=253, description="Name of the endpoint picker's Service.")
    port: PortNumber = Field(description="The Service port (not the target port) of the endpoint picker.")
    failure_mode: FailureMode = Field(
        default=FailureMode.FAIL_CLOSE,
        description="FailClose drops requests while the picker does not answer (GIE's default); FailOpen lets "
        "the gateway pick an endpoint itself.",
    )


class InferencePoolRouting(ApiModel):
    """An InferencePool (inference.networking.k8s.io/v1) owned by the service."""

    enabled: bool = Field(
        default=False,
        description="Create and own an InferencePool named like the service that selects its engine pods on "
        "`spec.engine.port`; needs the GIE v1 CRDs in the cluster.",
    )
    endpoint_picker_ref: EndpointPickerRef | None = Field(
        default=None, description="The endpoint picker; required when enabled (GIE v1 `endpointPickerRef`)."
    )


class RoutingSpec(ApiModel):
    """Routing integrations beyond the ClusterIP Service."""

    inference_pool: InferencePoolRouting = Field(
        default_factory=InferencePoolRouting, description="Gateway API Inference Extension InferencePool."
    )
