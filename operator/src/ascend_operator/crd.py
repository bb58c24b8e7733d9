"""Generate the CustomResourceDefinition from the pydantic models (`aisctl crd`, `make crd`).

It lives above `api` and `validation` because it joins them: the models come from `api`, which imports
nothing else of the package, and the CEL rules from `validation`, which renders to check them.

The models are the schema: descriptions, defaults, ranges and patterns come from their fields, the CEL
rules from `ascend_operator.validation.rules`. The output is a structural OpenAPI v3 schema as the API
server wants it: no `$ref`, no `anyOf` with null, no titles, OpenAPI 3.0 exclusive bounds, free-form maps
marked `x-kubernetes-preserve-unknown-fields`, and `default: {}` / `[]` on optional objects and lists so
that nested defaults apply and CEL rules can rely on the fields being present.
"""

from typing import Any

from ascend_operator.api.constants import (
    CATEGORY,
    GROUP,
    KIND,
    PLURAL,
    SHORT_NAME,
    SINGULAR,
    VERSION,
)
from ascend_operator.api.parse import NAME, NAME_MAX, NAME_RULE
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.api.status import AscendInferenceServiceStatus
from ascend_operator.reference import annotate_schema
from ascend_operator.validation.rules import RULES

Schema = dict[str, Any]

#: `kubectl get ais`: what serves, how fast, and why not; `-o wide` (priority 1) adds where and which spec.
PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas", "description": "Ready pods."},
    {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas", "description": "Desired pods."},
    {
        "name": "Model",
        "type": "string",
        "jsonPath": ".spec.model.servedName",
        "description": "Served model name (what clients ask for).",
    },
    {
        "name": "TP",
        "type": "integer",
        "jsonPath": ".spec.parallelism.tensor",
        "description": "Tensor parallel.",
        "priority": 1,
    },
    {
        "name": "MaxLen",
        "type": "integer",
        "jsonPath": ".spec.engine.maxModelLen",
        "description": "Max model len.",
    },
    {
        "name": "Tok/s",
        "type": "string",
        "jsonPath": ".status.tokensPerSecondDisplay",
        "description": "Tokens/s.",
    },
    {
        "name": "KV",
        "type": "string",
        "jsonPath": ".status.kvCacheUsageDisplay",
        "description": "KV cache usage.",
    },
    {
        "name": "Accept",
        "type": "number",
        "jsonPath": ".status.metrics.acceptanceLength",
        "description": "Speculative acceptance length (1 + accepted / drafts).",
        "priority": 1,
    },
    {
        "name": "Status",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
        "description": "Reason of the Ready condition: the first blocking cause of a replica that does not serve.",
    },
    {
        "name": "Degraded",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Degraded")].reason',
        "description": "Reason of the Degraded condition (AsExpected when nothing is wrong).",
    },
    {
        "name": "Restarts",
        "type": "integer",
        "jsonPath": ".status.restarts",
        "description": "Container restarts summed over the engine pods.",
    },
    {
        "name": "LastRoll",
        "type": "date",
        "jsonPath": ".status.lastRoll.time",
        "description": "When the operator last recreated a pod (reason in .status.lastRoll).",
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {
        "name": "Endpoint",
        "type": "string",
        "jsonPath": ".status.endpoint",
        "description": "In-cluster URL of the OpenAI-compatible API.",
        "priority": 1,
    },
    {
        "name": "SpecHash",
        "type": "string",
        "jsonPath": ".status.specHash",
        "description": "Digest of the pod spec the current spec renders (pods carry it as an annotation).",
        "priority": 1,
    },
]


#: metadata.name as a Service name (root-level CEL may read metadata.name): `kubectl apply` refuses
#: `dsv4.flash` instead of the operator failing to create its Service later.
NAME_VALIDATION = {
    "rule": f"size(self.metadata.name) <= {NAME_MAX} && self.metadata.name.matches('{NAME.pattern}')",
    "message": NAME_RULE,
    "reason": "FieldValueInvalid",
    "fieldPath": ".metadata.name",
}


def _resolve(node: Any, defs: dict[str, Schema]) -> Any:
    if isinstance(node, list):
        return [_resolve(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    return {key: _resolve(value, defs) for key, value in node.items()}


def _structural(node: Schema) -> Schema:
    """Rewrite one resolved JSON-schema node (and below) into a structural OpenAPI v3 node."""
    node = dict(node)
    any_of = node.pop("anyOf", None)
    if any_of is not None:
        non_null = [alt for alt in any_of if alt.get("type") != "null"]
        if len(non_null) != 1:
            raise ValueError(f"cannot express a union in a structural schema: {any_of}")
        node = {**non_null[0], **node}
    node.pop("title", None)
    if node.get("default", 0) is None:
        del node["default"]
    for bound in ("exclusiveMinimum", "exclusiveMaximum"):
        if bound in node and not isinstance(node[bound], bool):
            node["minimum" if bound == "exclusiveMinimum" else "maximum"] = node[bound]
            node[bound] = True
    if "enum" in node and "type" not in node:
        node["type"] = "string"
    if node.get("additionalProperties") is False:
        del node["additionalProperties"]  # extra="forbid"; unknown fields are pruned or refused by kubectl
    elif node.get("additionalProperties") is True:
        node["additionalProperties"] = {"x-kubernetes-preserve-unknown-fields": True}
    elif isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = _structural(node["additionalProperties"])
    if node.get("type") == "object" and "properties" not in node and "additionalProperties" not in node:
        node["x-kubernetes-preserve-unknown-fields"] = True
    if "items" in node:
        node["items"] = _structural(node["items"])
    if "properties" in node:
        required = set(node.get("required", []))
        props = {}
        for name, raw_child in node["properties"].items():
            child = _structural(raw_child)
            # A field without any default in the model has a default_factory: an empty object or list.
            implied = name not in required and "default" not in raw_child
            if implied and child.get("type") in ("object", "array"):
                child["default"] = {} if child["type"] == "object" else []
            props[name] = child
        node["properties"] = props
    return node


def _attach_rules(spec_schema: Schema) -> None:
    for rule in RULES:
        if rule.cel is None:
            continue
        node = spec_schema
        for step in rule.cel_scope:
            node = node["properties"][step]
        entry: dict[str, Any] = {"rule": rule.cel, "message": rule.message, "reason": "FieldValueInvalid"}
        if rule.cel_field_path:
            entry["fieldPath"] = rule.cel_field_path
        node.setdefault("x-kubernetes-validations", []).append(entry)


def model_schema(model: type[AscendInferenceServiceSpec] | type[AscendInferenceServiceStatus]) -> Schema:
    """A structural schema for one model."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return _structural(_resolve(raw, defs))


def spec_schema() -> Schema:
    """The spec's structural schema with its CEL rules."""
    schema = model_schema(AscendInferenceServiceSpec)
    env = schema["properties"]["env"]
    env["x-kubernetes-list-type"] = "map"
    env["x-kubernetes-list-map-keys"] = ["name"]
    _attach_rules(schema)
    annotate_schema(schema)  # the vLLM flag each field renders, from the contract
    return schema


def build_crd() -> dict[str, Any]:
    """The whole CustomResourceDefinition."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "ascend-inference-operator"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": [SHORT_NAME],
                "categories": [CATEGORY],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    # The scale subresource: `kubectl scale ais/NAME --replicas N`, an HPA or a KEDA
                    # ScaledObject set spec.replicas; they read status.replicas and status.selector.
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "An LLM served by vLLM (vllm-ascend) on Ascend NPUs, judged by real "
                            "generation rather than /health.",
                            "required": ["spec"],
                            "x-kubernetes-validations": [NAME_VALIDATION],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                # only name/generateName may be constrained; declaring name lets the
                                # rule below point its error at metadata.name
                                "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
                                "spec": spec_schema(),
                                "status": model_schema(AscendInferenceServiceStatus),
                            },
                        }
                    },
                }
            ],
        },
    }
