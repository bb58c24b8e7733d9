"""Who may talk to an engine: the API key from a Secret and the NetworkPolicy in front of the engine port.

vLLM 0.25.1 guards only the `/v1`, `/v2` and `/inference` prefixes with its key
(vllm/entrypoints/serve/utils/server_utils.py:42 GUARDED_PREFIX, :90); `/metrics`, `/health`, and also
`/invocations`, `/pause`, `/tokenize` stay open (docs/usage/security.md:146-215). The key alone is
therefore not an access boundary, which is why the NetworkPolicy is on by default and the key is
optional: the two are separate fields because they protect against different things.
"""

from typing import Annotated

from pydantic import Field

from ascend_operator.api.base import ApiModel

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
SECRET_KEY = r"^[-._a-zA-Z0-9]+$"


class SecretKeyRef(ApiModel):
    """One key of a Secret in the service's namespace."""

    name: str = Field(pattern=DNS_SUBDOMAIN, max_length=253, description="Secret name (same namespace).")
    key: str = Field(pattern=SECRET_KEY, max_length=253, description="Key inside the Secret's data.")


class AuthSpec(ApiModel):
    """Authentication the engine enforces."""

    api_key_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description="The engine's API key: reaches vLLM as the VLLM_API_KEY env var through a secretKeyRef "
        "(never in args, status or events); vLLM then answers 401 on /v1/* without `Authorization: Bearer "
        "<key>`. The operator reads the Secret (RBAC `get` on secrets, see the chart) for its canary and "
        "config check. /metrics and /health stay open, as vLLM serves them. A new version of the Secret "
        "replaces the engines one at a time (a container reads its env once). Unset: no key.",
    )


class NetworkPeer(ApiModel):
    """Pods admitted to the engine port: a namespace, optionally narrowed to pods with given labels."""

    namespace: str = Field(pattern=DNS_SUBDOMAIN, max_length=63, description="Namespace name.")
    pod_labels: dict[str, str] = Field(
        default_factory=dict, description="Only pods with these labels; empty: every pod of the namespace."
    )


class NetworkPolicySpec(ApiModel):
    """The NetworkPolicy the operator keeps in front of each service's engine pods."""

    enabled: bool = Field(
        default=True,
        description="Own a NetworkPolicy per service. On by default: vLLM's key leaves /invocations, /pause "
        "and /tokenize open to anyone who reaches the pod IP (vLLM docs/usage/security.md), and the default "
        "still admits the service's own namespace, so in-namespace clients keep working. It needs a CNI "
        "that enforces NetworkPolicy; without one it is inert.",
    )
    allow_same_namespace: bool = Field(
        default=True, description="Admit every pod of the service's own namespace to the engine port."
    )
    clients: list[NetworkPeer] = Field(
        default_factory=list, description="Further namespaces (and pods) admitted to the engine port."
    )
    monitoring_namespaces: list[Annotated[str, Field(pattern=DNS_SUBDOMAIN, max_length=63)]] = Field(
        default_factory=list,
        description="Namespaces whose pods may scrape the engines (e.g. the one Prometheus runs in). vLLM "
        "serves /metrics on the API port, so these reach that port; the API key still guards /v1/*.",
    )
