"""The LeaderWorkerSet webhooks of hack/local-cluster, as LWS v0.7.0 registers them, pointed at 127.0.0.1.

Why a module of its own: it is data (four admission webhooks mirrored from sigs.k8s.io/lws
config/webhook/manifests.yaml) that the cluster script only applies; hack/local-cluster imports it from
hack/lib/.
"""

from __future__ import annotations

import base64
from typing import Any


def lws_webhooks(port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """LWS's four webhooks (config/webhook/manifests.yaml of sigs.k8s.io/lws v0.7.0) pointed at a URL on
    127.0.0.1 instead of its in-cluster Service; pods only with the LWS name label, as its own chart does."""
    ca = base64.b64encode(ca_pem).decode()
    lws_rule = {"apiGroups": ["leaderworkerset.x-k8s.io"], "apiVersions": ["v1"], "resources": ["leaderworkersets"]}
    pod_rule = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
    pods_only = {"matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]}

    def hook(name: str, path: str, rule: dict[str, Any], ops: list[str], selector: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": 10,
            "rules": [{**rule, "operations": ops}],
        }
        if selector:
            body["objectSelector"] = pods_only
        return body

    meta = {"labels": {"app.kubernetes.io/managed-by": "local-cluster"}}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "lws-mutating-webhook-configuration", **meta},
            "webhooks": [
                hook(
                    "mleaderworkerset.kb.io",
                    "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
                    lws_rule,
                    ["CREATE", "UPDATE"],
                    False,
                ),
                hook("mpod.kb.io", "/mutate--v1-pod", pod_rule, ["CREATE"], True),
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "lws-validating-webhook-configuration", **meta},
            "webhooks": [
                hook(
                    "vleaderworkerset.kb.io",
                    "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
                    lws_rule,
                    ["CREATE", "UPDATE"],
                    False,
                ),
                hook("vpod.kb.io", "/validate--v1-pod", pod_rule, ["CREATE", "UPDATE"], True),
            ],
        },
    ]
