"""The router in front of one service's engines: vllm-router 0.1.17's arguments, its Deployment, RBAC,
Service and disruption budget, as plain dicts.

Why each piece is the way it is (sources: the vllm-router 0.1.17 sdist; docs/router.md has the detail):

- Discovery: the router watches pods itself (`--service-discovery`) and routes to a pod only while the
  pod's `Ready` condition is True and its phase Running (src/service_discovery.rs:149-153, :209-211,
  :417); a pod that turns unready or loses the selector's labels is removed (:513-517). Kubernetes sets
  `Ready` only when every readiness gate is True, and every engine pod carries the operator's gate
  (render/probes.py READINESS_GATE), so the router follows the operator's judgement with the serving
  selector alone: no extra label is needed.
- RBAC: the discovery is a kube-rs watcher on pods of one namespace (src/service_discovery.rs:289-293,
  :306-307) with the default config, which lists and then watches (kube-runtime 1.1.0 watcher.rs:249-260,
  :502, :575). So the Role grants exactly `list` and `watch` on pods; `--service-discovery-namespace` keeps
  it a Role instead of a ClusterRole (router_args.py: "If not provided, watches all namespaces").
- The API key: in regular mode the router forwards the client's `Authorization` header to the engine
  (src/routers/http/router.rs:1963-1976), so the engine checks the client's own key and the router needs
  none. `--api-key` would be an argument (the only way the launcher takes it) and, once set, replaces the
  client's header on the transparent-proxy path (router.rs:3240-3242) for callers the router never
  authenticates. The P/D path sends `Bearer $OPENAI_API_KEY` from its environment on both legs
  (src/routers/http/vllm_pd_router.rs:1762-1769, :1922-1929): that is the one place a key goes, as an env
  from the Secret, never an argument.
- Probes: `/readiness` answers 503 until the router has a healthy engine (router.rs:2953-2978), `/liveness`
  200 while the process serves (src/routers/mod.rs:183-186).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ascend_operator.api.constants import LABEL_ROUTER, LABEL_SERVICE, MANAGED_BY, ROUTER_CONTAINER
from ascend_operator.api.router import RouterPolicy, RouterSpec
from ascend_operator.api.security import SecretKeyRef
from ascend_operator.render.pod import Owner, owner_metadata

ROUTER_COMMAND = ("vllm-router",)
#: vllm-router's Prometheus port (router_args.py `--prometheus-port` default 29000); it binds 127.0.0.1
#: unless told otherwise (`--prometheus-host` default), which a scraper outside the pod cannot reach.
METRICS_PORT = 29000
READINESS_PATH = "/readiness"
LIVENESS_PATH = "/liveness"
#: Read by the P/D path only (vllm_pd_router.rs:1766, :1926); the regular path forwards the client's key.
API_KEY_ENV = "OPENAI_API_KEY"
#: The least the token bucket refills (src/core/token_bucket.rs:36-41 turns 0 into 1 token per second).
MIN_REFILL_PER_SECOND = 1
#: Exactly what the pod discovery calls: kube-runtime's watcher lists, then watches, pods in one namespace.
DISCOVERY_RULES: tuple[dict[str, Any], ...] = ({"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},)
#: The router's P/D contract that vllm-ascend's Mooncake connector follows (docs/router.md "Verdict").
PD_KV_CONNECTOR = "nixl"
#: An unprivileged uid: the router writes nothing but logs to stdout (no --log-dir) and /tmp.
RUN_AS_USER = 65532
DEFAULT_REQUESTS = {"cpu": "1", "memory": "1Gi"}


@dataclass(frozen=True, kw_only=True)
class RouterTarget:
    """What the router routes to: the service's engines, as the controller knows them."""

    owner: Owner
    engine_port: int
    engine_selector: Mapping[str, str]
    """The labels of the pods that serve the API (render/pod.py `serving_selector`): the router adds such a
    pod only while it is Ready, which includes the operator's readiness gate."""
    engine_replicas: int
    max_num_seqs: int
    data_parallel: int = 1
    """Engines per replica (`parallelism.data`): each runs its own scheduler with maxNumSeqs slots."""
    api_key: SecretKeyRef | None = None
    """The engines' key, for the P/D path only; None in regular mode (see the module docstring)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels for the router's objects and pods (never the operator's own keys)."""
    disaggregated: tuple[Mapping[str, str], Mapping[str, str]] | None = None
    """The prefill and decode pods' selectors of a disaggregated service: the router then runs vLLM's P/D
    path (`--vllm-pd-disaggregation`), the slots above being the decode engines'."""
    pool_policies: tuple[RouterPolicy | None, RouterPolicy | None] = (None, None)
    """The prefill and decode pools' own policies (`--prefill-policy`, `--decode-policy`); None: `--policy`."""
    pod_scheduling: Mapping[str, str] = field(default_factory=dict)
    """The router pod's `schedulerName` and `priorityClassName`, the engines' (render/scheduling.py)."""
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    """The router pod's annotations: the engines' Volcano queue (render/scheduling.py)."""


def router_name(owner: Owner) -> str:
    """The router's objects are named `<service>-router`."""
    return f"{owner.name}-router"


def router_selector(owner: Owner) -> dict[str, str]:
    """The labels that select this service's router pods (Service, budget, Deployment)."""
    return {LABEL_ROUTER: owner.name}


def router_labels(target: RouterTarget) -> dict[str, str]:
    """Recommended app.kubernetes.io labels plus the router selector; never the engines' selector label."""
    return {
        **target.labels,
        "app.kubernetes.io/name": "ascend-inference",
        "app.kubernetes.io/instance": target.owner.name,
        "app.kubernetes.io/component": "router",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        **router_selector(target.owner),
    }


def engine_slots(target: RouterTarget) -> int:
    """Sequences the engines can run at once: replicas x engines per replica x maxNumSeqs."""
    return target.engine_replicas * target.data_parallel * target.max_num_seqs


def max_concurrent_requests(spec: RouterSpec, target: RouterTarget) -> int:
    """`--max-concurrent-requests` of one router replica: the spec's value, else the engines' slots divided
    among the router replicas (each replica has its own bucket), at least 1 (the router needs a token)."""
    if spec.admission.max_concurrent_requests is not None:
        return spec.admission.max_concurrent_requests
    return max(1, engine_slots(target) // spec.replicas)


def _selector_args(selector: Mapping[str, str]) -> list[str]:
    """`key=value` words, the form `--selector` parses (router_args.py `_parse_selector`), sorted."""
    return [f"{key}={value}" for key, value in sorted(selector.items())]


def _discovery_args(target: RouterTarget) -> list[str]:
    """Which pods the router adds: the serving selector, or in P/D mode one selector per role (pd_mode reads
    only those two, src/service_discovery.rs:104-113, :161-165). `--kv-connector nixl` is the contract that
    matches vllm-ascend's MooncakeConnectorV1 (docs/router.md "P/D contract"); `mooncake` does not."""
    if target.disaggregated is None:
        return ["--selector", *_selector_args(target.engine_selector)]
    prefill, decode = target.disaggregated
    args = [
        "--vllm-pd-disaggregation",
        "--prefill-selector", *_selector_args(prefill),
        "--decode-selector", *_selector_args(decode),
        "--kv-connector", PD_KV_CONNECTOR,
    ]  # fmt: skip
    # vllm-router 0.1.17 router_args.py:176-204: each pool's own policy, else --policy (router.py:142-143)
    for flag, policy in zip(("--prefill-policy", "--decode-policy"), target.pool_policies, strict=True):
        if policy is not None:
            args += [flag, policy.value]
    return args


def build_router_args(spec: RouterSpec, target: RouterTarget) -> list[str]:
    """The `vllm-router` argument list (never a shell string)."""
    admission = spec.admission
    refill = admission.refill_per_second if admission.refill_per_second is not None else MIN_REFILL_PER_SECOND
    args = [
        "--host", "0.0.0.0",
        "--port", str(spec.port),
        "--service-discovery",
        *_discovery_args(target),
        "--service-discovery-namespace", target.owner.namespace,
        "--service-discovery-port", str(target.engine_port),
        "--policy", spec.policy.value,
        "--request-timeout-secs", str(spec.request_timeout_seconds),
        "--max-concurrent-requests", str(max_concurrent_requests(spec, target)),
        "--queue-size", str(admission.queue_size),
        "--queue-timeout-secs", str(admission.queue_timeout_seconds),
        "--rate-limit-tokens-per-second", str(refill),
    ]  # fmt: skip
    retries = spec.retries
    if retries.enabled:
        args += [
            "--retry-max-retries", str(retries.max_retries),
            "--retry-initial-backoff-ms", str(retries.initial_backoff_ms),
            "--retry-max-backoff-ms", str(retries.max_backoff_ms),
            "--retry-backoff-multiplier", repr(retries.backoff_multiplier),
            "--retry-jitter-factor", repr(retries.jitter_factor),
        ]  # fmt: skip
    else:
        args.append("--disable-retries")
    breaker = spec.circuit_breaker
    if breaker.enabled:
        args += [
            "--cb-failure-threshold", str(breaker.failure_threshold),
            "--cb-success-threshold", str(breaker.success_threshold),
            "--cb-timeout-duration-secs", str(breaker.timeout_seconds),
            "--cb-window-duration-secs", str(breaker.window_seconds),
        ]  # fmt: skip
    else:
        args.append("--disable-circuit-breaker")
    args += ["--prometheus-host", "0.0.0.0", "--prometheus-port", str(METRICS_PORT)]
    return args


def _metadata(target: RouterTarget) -> dict[str, Any]:
    """The router objects' metadata. They (not its pods) carry the service label, so the operator's watch
    caches hold the router's Service and budget and a pass finds them without asking the API server."""
    owner = target.owner
    return {
        "name": router_name(owner),
        "namespace": owner.namespace,
        "labels": {**router_labels(target), LABEL_SERVICE: owner.name},
        **owner_metadata(owner),
    }


def _resources(spec: RouterSpec) -> dict[str, Any]:
    requests = {**DEFAULT_REQUESTS, **spec.resources.requests}
    limits = dict(spec.resources.limits)
    limits.setdefault("memory", requests["memory"])
    return {"requests": requests, "limits": limits}


def _probe(path: str, *, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": 2,
        "failureThreshold": failures,
    }


def build_router_container(spec: RouterSpec, target: RouterTarget) -> dict[str, Any]:
    """The router container: argument list, probes, no privilege, the key (if any) through env only."""
    container: dict[str, Any] = {
        "name": ROUTER_CONTAINER,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": list(ROUTER_COMMAND),
        "args": build_router_args(spec, target),
        "ports": [
            {"name": "http", "containerPort": spec.port, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": _probe(READINESS_PATH, period=5, failures=2),
        "livenessProbe": _probe(LIVENESS_PATH, period=10, failures=6),
        "resources": _resources(spec),
        "securityContext": {
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    if target.api_key is not None:
        ref = {"name": target.api_key.name, "key": target.api_key.key}
        container["env"] = [{"name": API_KEY_ENV, "valueFrom": {"secretKeyRef": ref}}]
    return container


def _pod_annotations(target: RouterTarget) -> dict[str, Any]:
    return {"annotations": dict(target.pod_annotations)} if target.pod_annotations else {}


def build_router_deployment(spec: RouterSpec, target: RouterTarget) -> dict[str, Any]:
    """The router's Deployment: a new pod is Ready (it has an engine) before an old one goes."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(target),
        "spec": {
            "replicas": spec.replicas,
            "selector": {"matchLabels": router_selector(target.owner)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": router_labels(target), **_pod_annotations(target)},
                "spec": {
                    **target.pod_scheduling,
                    "serviceAccountName": router_name(target.owner),
                    # kube-rs Client::try_default reads the in-cluster token (service_discovery.rs:244).
                    "automountServiceAccountToken": True,
                    "enableServiceLinks": False,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [build_router_container(spec, target)],
                    "volumes": [{"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }


def build_router_service_account(target: RouterTarget) -> dict[str, Any]:
    """The identity the router's pod discovery runs as."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(target)}


def build_router_role(target: RouterTarget) -> dict[str, Any]:
    """Least privilege: `list` and `watch` on pods of the service's namespace, nothing else."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _metadata(target),
        "rules": [dict(rule) for rule in DISCOVERY_RULES],
    }


def build_router_role_binding(target: RouterTarget) -> dict[str, Any]:
    """Binds the Role to the router's ServiceAccount only."""
    name = router_name(target.owner)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(target),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": target.owner.namespace}],
    }


def build_router_service(spec: RouterSpec, target: RouterTarget) -> dict[str, Any]:
    """The ClusterIP Service clients call instead of the engine Service."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(target),
        "spec": {
            "type": "ClusterIP",
            "selector": router_selector(target.owner),
            "ports": [
                {"name": "http", "port": spec.port, "targetPort": "http", "protocol": "TCP"},
                {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
            ],
        },
    }


def build_router_pdb(target: RouterTarget) -> dict[str, Any]:
    """At most one router pod evicted at a time. maxUnavailable, not minAvailable: with one replica a drain
    must still proceed (the router comes back in seconds); a pod that is not Ready can always go."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(target),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": router_selector(target.owner)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def build_router_objects(spec: RouterSpec, target: RouterTarget) -> list[dict[str, Any]]:
    """Everything the router needs, in creation order (identity and rights before the pods that use them)."""
    return [
        build_router_service_account(target),
        build_router_role(target),
        build_router_role_binding(target),
        build_router_deployment(spec, target),
        build_router_service(spec, target),
        build_router_pdb(target),
    ]
