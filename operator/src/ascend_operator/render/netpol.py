"""The NetworkPolicy in front of one service's engine pods, built as a plain dict from a validated spec.

Why: vLLM's API key guards /v1, /v2 and /inference only; /invocations (the same inference as /v1),
/pause, /tokenize and /metrics answer anyone who reaches the pod IP (vllm docs/usage/security.md:146-215,
vllm/entrypoints/serve/utils/server_utils.py:42). So who may reach the port is the real boundary:

- the engine port from the service's namespace (unless turned off), the listed client namespaces/pods,
  and the operator's pods (canary, /metrics scrape, config check);
- the same port from the monitoring namespaces: vLLM serves /metrics on the API port
  (vllm/entrypoints/serve/instrumentator/metrics.py:78), so L3/L4 policy cannot admit one without the
  other; the API key still guards /v1 for them;
- every port between the pods of one service (multi-node engines exchange traffic among themselves);
- for a role of a disaggregated service (spec.pdRole): the group's router to the engine port, and every
  port between the two roles' pods (the Mooncake handshake on kv_port + rank, and the transfer engine's
  own ports, random in [20000, 28000) on an 8-NPU node: vllm-ascend's P/D tutorial :219-230).

Ingress only: the engine's egress (weights on shared storage, HCCL between nodes) is not constrained.
"""

from dataclasses import dataclass, field
from typing import Any

from ascend_operator.api.constants import LABEL_ROUTER, LABEL_SERVICE
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.render.disaggregation import ROLES, role_name
from ascend_operator.render.pod import Owner, common_labels, owner_metadata

#: The label the API server sets on every namespace (GA in 1.22): selects a namespace by name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: Where the operator runs unless told otherwise (the chart passes its release namespace and labels).
DEFAULT_OPERATOR_NAMESPACE = "ascend-system"
DEFAULT_OPERATOR_LABELS = {"app.kubernetes.io/name": "ascend-inference-operator"}


@dataclass(frozen=True, kw_only=True)
class OperatorPeer:
    """The operator's own pods: its namespace and pod labels."""

    namespace: str = DEFAULT_OPERATOR_NAMESPACE
    pod_labels: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_OPERATOR_LABELS))


def policy_name(owner: Owner) -> str:
    """The NetworkPolicy is named after the service."""
    return owner.name


def _peer(namespace: str, pod_labels: dict[str, str]) -> dict[str, Any]:
    peer: dict[str, Any] = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}}
    if pod_labels:
        peer["podSelector"] = {"matchLabels": dict(pod_labels)}
    return peer


def _client_peers(spec: AscendInferenceServiceSpec, operator: OperatorPeer) -> list[dict[str, Any]]:
    policy = spec.network_policy
    peers: list[dict[str, Any]] = [{"podSelector": {}}] if policy.allow_same_namespace else []
    peers += [_peer(c.namespace, c.pod_labels) for c in policy.clients]
    peers.append(_peer(operator.namespace, operator.pod_labels))
    return peers


def _pd_peers(spec: AscendInferenceServiceSpec, port: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pd = spec.pd_role
    if pd is None:
        return []
    roles = {"key": LABEL_SERVICE, "operator": "In", "values": [role_name(pd.group, r) for r in ROLES]}
    return [
        {"from": [{"podSelector": {"matchLabels": {LABEL_ROUTER: pd.group}}}], "ports": port},
        {"from": [{"podSelector": {"matchExpressions": [roles]}}]},
    ]


def build_network_policy(
    spec: AscendInferenceServiceSpec, *, owner: Owner, operator: OperatorPeer
) -> dict[str, Any] | None:
    """The service's NetworkPolicy, or None when `spec.networkPolicy.enabled` is false."""
    policy = spec.network_policy
    if not policy.enabled:
        return None
    port = [{"protocol": "TCP", "port": spec.engine.port}]
    own_pods = {"podSelector": {"matchLabels": {LABEL_SERVICE: owner.name}}}
    ingress: list[dict[str, Any]] = [
        {"from": _client_peers(spec, operator), "ports": port},
        {"from": [own_pods]},
    ]
    if spec.router is not None:  # the service's own router (render/router.py) reaches the engine port
        ingress.append({"from": [{"podSelector": {"matchLabels": {LABEL_ROUTER: owner.name}}}], "ports": port})
    ingress += _pd_peers(spec, port)
    if policy.monitoring_namespaces:
        ingress.append({"from": [_peer(ns, {}) for ns in policy.monitoring_namespaces], "ports": port})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": policy_name(owner),
            "namespace": owner.namespace,
            "labels": common_labels(owner),
            **owner_metadata(owner),
        },
        "spec": {
            "podSelector": {"matchLabels": {LABEL_SERVICE: owner.name}},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }
