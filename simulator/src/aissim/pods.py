"""Pod discovery for the simulator's supervisors: which engine each pod of the cluster needs, read as a kubelet would.

`aissim attach` (one process per engine, attach.py) and `aissim attach --shared` (every engine in one
process, shared.py) supervise engines differently but find them the same way: one LIST of the pods that
carry the operator's service label, each running pod with an IP and an engine container turned into a
`Target` (the pod's rendered args with `$(VAR)` expanded, the leader's DNS name resolved to its IP, the
Secret env it references). Here, in a module of its own, so neither supervisor imports the other. A
second LIST finds the router pods of `spec.router` (their `router` container's args, the ServiceAccount
whose token the kubelet would mount) for aissim/routers.py.
"""

import base64
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client, config

from ascend_operator.api.constants import ENGINE_CONTAINER, LABEL_ROUTER, LABEL_SERVICE, ROUTER_CONTAINER

#: Seconds an engine that exited waits before it is started again, as a kubelet restarts a container.
RESTART_BACKOFF_SECONDS = 1.0


@dataclass(frozen=True, kw_only=True)
class Target:
    """A pod that should have a simulator."""

    uid: str
    name: str
    namespace: str
    ip: str
    args: tuple[str, ...]
    port: int
    secret_env: tuple[tuple[str, str, str], ...] = ()
    """(variable, Secret name, key) of each env entry from a secretKeyRef."""
    service_account: str | None = None
    """The ServiceAccount whose token the kubelet mounts (None: automountServiceAccountToken false); routers only."""


_REF = re.compile(r"\$\(([-._A-Za-z0-9]+)\)")


def container_env(container: Mapping[str, Any], pod_ip: str) -> dict[str, str]:
    """The container's env values as the kubelet resolves them (literal values and status.podIP)."""
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = str(var["value"])
        elif ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") == "status.podIP":
            env[var["name"]] = pod_ip
    return env


def expand(arg: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(NAME)` expansion in args; an undefined reference stays as written."""
    return _REF.sub(lambda m: env.get(m.group(1), m.group(0)), arg)


def resolve_address(args: list[str], namespace: str, pod_ips: Mapping[tuple[str, str], str]) -> bool:
    """Play cluster DNS for `--data-parallel-address`: LWS's leader address `<pod>.<subdomain>.<ns>`
    (sigs.k8s.io/lws v0.7.0 pkg/utils/pod/pod_utils.go:136) becomes that pod's IP; False while unknown."""
    if "--data-parallel-address" not in args:
        return True
    at = args.index("--data-parallel-address") + 1
    host = args[at]
    if host.replace(".", "").isdigit():
        return True
    parts = host.split(".")
    ip = pod_ips.get((parts[2] if len(parts) > 2 else namespace, parts[0]))
    if ip is None:
        return False
    args[at] = ip
    return True


def _running_container(pod: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """The pod's container `name` if a kubelet would run it now: the pod Running with an IP, not
    terminating, and the container given args."""
    meta, status, spec = pod.get("metadata") or {}, pod.get("status") or {}, pod.get("spec") or {}
    if meta.get("deletionTimestamp") or status.get("phase") != "Running" or not status.get("podIP"):
        return None
    container = next((c for c in spec.get("containers") or [] if c.get("name") == name), None)
    return container if container is not None and container.get("args") else None


def _http_port(container: Mapping[str, Any], default: int) -> int:
    ports = [p.get("containerPort") for p in container.get("ports") or [] if p.get("name") == "http"]
    return int(ports[0]) if ports else default


def _secret_refs(container: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    refs = [(e["name"], e.get("valueFrom", {}).get("secretKeyRef")) for e in container.get("env") or []]
    return tuple((name, ref["name"], ref["key"]) for name, ref in refs if ref)


def target_of(pod: Mapping[str, Any], pod_ips: Mapping[tuple[str, str], str] | None = None) -> Target | None:
    """The simulator a pod needs, or None (not running, no IP, terminating, no engine container, or a
    group member whose leader has no IP yet)."""
    engine = _running_container(pod, ENGINE_CONTAINER)
    if engine is None:
        return None
    meta, ip = pod["metadata"], pod["status"]["podIP"]
    env = container_env(engine, ip)
    args = [expand(a, env) for a in engine["args"]]
    if not resolve_address(args, meta["namespace"], pod_ips or {}):
        return None
    if args[:1] == ["vllm"]:  # the engine command rendered as args (the pod keeps the image's ENTRYPOINT)
        args = args[1:]
    return Target(
        uid=meta["uid"], name=meta["name"], namespace=meta["namespace"], ip=ip, args=tuple(args),
        port=_http_port(engine, 8000), secret_env=_secret_refs(engine),
    )  # fmt: skip


#: vllm-router's own `--port` default (router_args.py), for a container that names no `http` port.
ROUTER_DEFAULT_PORT = 30000


def router_target_of(pod: Mapping[str, Any]) -> Target | None:
    """The router a pod of `spec.router` needs (its `router` container's args with `$(VAR)` expanded), or
    None as for an engine. The kubelet mounts the token of the pod's ServiceAccount unless the pod opts
    out (`automountServiceAccountToken: false`), and the router's discovery authenticates with it."""
    router = _running_container(pod, ROUTER_CONTAINER)
    if router is None:
        return None
    meta, spec, ip = pod["metadata"], pod.get("spec") or {}, pod["status"]["podIP"]
    env = container_env(router, ip)
    automount = spec.get("automountServiceAccountToken") is not False
    return Target(
        uid=meta["uid"], name=meta["name"], namespace=meta["namespace"], ip=ip,
        args=tuple(expand(a, env) for a in router["args"]), port=_http_port(router, ROUTER_DEFAULT_PORT),
        secret_env=_secret_refs(router),
        service_account=(spec.get("serviceAccountName") or "default") if automount else None,
    )  # fmt: skip


def pod_ips(pods: list[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(namespace, name) -> pod IP of every listed pod that has one."""
    return {
        (p["metadata"]["namespace"], p["metadata"]["name"]): ip
        for p in pods
        if (ip := (p.get("status") or {}).get("podIP"))
    }


SecretEnv = Callable[[Target], dict[str, str]]


def no_secrets(target: Target) -> dict[str, str]:
    """For a cluster-less run: no Secret values."""
    return {}


def secret_reader(core: client.CoreV1Api) -> SecretEnv:
    """Resolve a target's secretKeyRef env through the API (the values are never logged)."""

    def resolve(target: Target) -> dict[str, str]:
        env = {}
        for var, secret, key in target.secret_env:
            data = core.read_namespaced_secret(secret, target.namespace).data or {}
            if key in data:
                env[var] = base64.b64decode(data[key]).decode()
        return env

    return resolve


def connect(kubeconfig: str | None) -> tuple[client.CoreV1Api, client.ApiClient]:
    """The API clients of a kubeconfig (default: KUBECONFIG or ~/.kube/config)."""
    config.load_kube_config(config_file=kubeconfig)
    return client.CoreV1Api(), client.ApiClient()


def list_targets(core: client.CoreV1Api, api: client.ApiClient, namespace: str | None) -> list[Target]:
    """The simulators the operator's pods need now (one LIST of the pods carrying the service label)."""
    if namespace:
        pods = core.list_namespaced_pod(namespace, label_selector=LABEL_SERVICE)
    else:
        pods = core.list_pod_for_all_namespaces(label_selector=LABEL_SERVICE)
    raw = [api.sanitize_for_serialization(p) for p in pods.items]
    ips = pod_ips(raw)
    return [t for p in raw if (t := target_of(p, ips))]


def list_router_targets(core: client.CoreV1Api, api: client.ApiClient, namespace: str | None) -> list[Target]:
    """The routers the operator's router pods need now (one LIST of the pods carrying the router label)."""
    if namespace:
        pods = core.list_namespaced_pod(namespace, label_selector=LABEL_ROUTER)
    else:
        pods = core.list_pod_for_all_namespaces(label_selector=LABEL_ROUTER)
    return [t for p in pods.items if (t := router_target_of(api.sanitize_for_serialization(p)))]


#: What a pod listing raises while the API server is down or restarting: the kubernetes client lets urllib3's
#: MaxRetryError (not an OSError) through once its connection retries are spent, so catching only
#: ApiException and OSError ended `attach`, and every engine with it, on a kube-apiserver restart
#: (tests/e2e/test_drills.py). A kubelet keeps its containers running through that; so does attach.
API_UNREACHABLE = (client.ApiException, OSError, urllib3.exceptions.HTTPError)
