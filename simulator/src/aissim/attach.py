"""`aissim attach`: give every engine pod of a (KWOK) cluster a simulator, as a kubelet would a container.

It watches the pods the operator owns through the kubeconfig and, for each running pod with an IP,
starts `aissim serve` with the pod's own rendered args, bound to the pod's 127.x IP and engine port.
When the pod goes (or is replaced), its simulator is stopped; a simulator that exits (the `crash` fault)
is restarted after a short back-off, as the kubelet restarts a container. Tests, the demo and users share
this command. Simulator settings reach the children through the AIS_SIM_* environment (see sim/cli.py).
Env vars the engine container takes from a Secret (the API key's secretKeyRef) are read through the API
and handed to the child, as the kubelet resolves them at container start; plain `value` entries are not
(the simulator models none of the profile's variables). With `--shared` every engine runs inside this
one process instead (aissim/shared.py): the same servers, a fraction of the memory, for scale runs.
"""

import argparse
import asyncio
import base64
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config

from ascend_operator.api.constants import LABEL_SERVICE
from ascend_operator.render.pod import ENGINE_CONTAINER

log = logging.getLogger("aissim.attach")
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


@dataclass
class Child:
    """A running simulator process."""

    target: Target
    process: subprocess.Popen[bytes]
    exited_at: float | None = None


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


def target_of(pod: Mapping[str, Any], pod_ips: Mapping[tuple[str, str], str] | None = None) -> Target | None:
    """The simulator a pod needs, or None (not running, no IP, terminating, no engine container, or a
    group member whose leader has no IP yet)."""
    meta, status, spec = pod.get("metadata") or {}, pod.get("status") or {}, pod.get("spec") or {}
    if meta.get("deletionTimestamp") or status.get("phase") != "Running" or not status.get("podIP"):
        return None
    engine = next((c for c in spec.get("containers") or [] if c.get("name") == ENGINE_CONTAINER), None)
    if engine is None or not engine.get("args"):
        return None
    env = container_env(engine, status["podIP"])
    args = [expand(a, env) for a in engine["args"]]
    if not resolve_address(args, meta["namespace"], pod_ips or {}):
        return None
    ports = [p.get("containerPort") for p in engine.get("ports") or [] if p.get("name") == "http"]
    if args[:1] == ["vllm"]:  # the engine command rendered as args (the pod keeps the image's ENTRYPOINT)
        args = args[1:]
    refs = [(e["name"], e.get("valueFrom", {}).get("secretKeyRef")) for e in engine.get("env") or []]
    return Target(
        uid=meta["uid"], name=meta["name"], namespace=meta["namespace"], ip=status["podIP"],
        args=tuple(args), port=int(ports[0]) if ports else 8000,
        secret_env=tuple((name, ref["name"], ref["key"]) for name, ref in refs if ref),
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


def spawn(target: Target, *, log_dir: Path | None, secrets: SecretEnv = no_secrets) -> subprocess.Popen[bytes]:
    """Start `aissim serve <pod args>` on the pod's address."""
    env = {**os.environ, **secrets(target), "AIS_SIM_BIND_HOST": target.ip, "AIS_SIM_BIND_PORT": str(target.port)}
    out: Any = subprocess.DEVNULL
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        out = (log_dir / f"{target.namespace}_{target.name}_{target.uid[:8]}.log").open("ab")
    log.info("sim for %s/%s on %s:%d", target.namespace, target.name, target.ip, target.port)
    return subprocess.Popen(
        [sys.executable, "-m", "aissim", *target.args], env=env, stdout=out, stderr=subprocess.STDOUT
    )


def stop(child: Child) -> None:
    """Stop one simulator by its PID: SIGTERM, then SIGKILL after 5 s."""
    if child.process.poll() is None:
        child.process.send_signal(signal.SIGTERM)
        try:
            child.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()


def sync(
    children: dict[str, Child],
    targets: list[Target],
    *,
    now: float,
    log_dir: Path | None,
    secrets: SecretEnv = no_secrets,
) -> None:
    """Make the running simulators match the pods."""
    wanted = {t.uid: t for t in targets}
    for uid in [u for u in children if u not in wanted]:
        stop(children.pop(uid))
    for uid, target in wanted.items():
        child = children.get(uid)
        if child is None:
            children[uid] = Child(target=target, process=spawn(target, log_dir=log_dir, secrets=secrets))
        elif child.process.poll() is not None:
            if child.exited_at is None:
                child.exited_at = now
                log.info("sim for %s exited with %s", target.name, child.process.returncode)
            elif now - child.exited_at >= RESTART_BACKOFF_SECONDS:
                children[uid] = Child(target=target, process=spawn(target, log_dir=log_dir, secrets=secrets))


def list_targets(core: client.CoreV1Api, api: client.ApiClient, namespace: str | None) -> list[Target]:
    """The simulators the operator's pods need now (one LIST of the pods carrying the service label)."""
    if namespace:
        pods = core.list_namespaced_pod(namespace, label_selector=LABEL_SERVICE)
    else:
        pods = core.list_pod_for_all_namespaces(label_selector=LABEL_SERVICE)
    raw = [api.sanitize_for_serialization(p) for p in pods.items]
    ips = pod_ips(raw)
    return [t for p in raw if (t := target_of(p, ips))]


#: What a pod listing raises while the API server is down or restarting: the kubernetes client lets urllib3's
#: MaxRetryError (not an OSError) through once its connection retries are spent, so catching only
#: ApiException and OSError ended `attach`, and every engine with it, on a kube-apiserver restart
#: (tests/e2e/test_drills.py). A kubelet keeps its containers running through that; so does attach.
API_UNREACHABLE = (client.ApiException, OSError, urllib3.exceptions.HTTPError)


def poll(
    children: dict[str, Child],
    core: client.CoreV1Api,
    api: client.ApiClient,
    namespace: str | None,
    *,
    log_dir: Path | None,
) -> bool:
    """One listing and sync of the simulators; False (logged, children untouched) when the API is unreachable."""
    try:
        targets = list_targets(core, api, namespace)
        sync(children, targets, now=time.monotonic(), log_dir=log_dir, secrets=secret_reader(core))
    except API_UNREACHABLE as exc:
        log.warning("listing pods failed: %s", exc)
        return False
    return True


def run(args: argparse.Namespace) -> int:
    """Poll the pods and keep the simulators in step until interrupted."""
    config.load_kube_config(config_file=args.kubeconfig)
    core = client.CoreV1Api()
    api = client.ApiClient()
    children: dict[str, Child] = {}
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log_dir = Path(args.log_dir) if args.log_dir else None
    try:
        while not stopping:
            poll(children, core, api, args.namespace, log_dir=log_dir)
            time.sleep(args.interval)
    finally:
        for child in children.values():
            stop(child)
    return 0


def main(argv: list[str]) -> int:
    """Entry point for `aissim attach`."""
    parser = argparse.ArgumentParser(prog="aissim attach", description=__doc__)
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig (default: KUBECONFIG or ~/.kube/config)")
    parser.add_argument("-n", "--namespace", default=None, help="only pods of this namespace")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between pod listings")
    parser.add_argument("--log-dir", default=None, help="write each simulator's output to a file here")
    parser.add_argument(
        "--shared", action="store_true",
        help="run every pod's engine inside this one process (aissim/shared.py), for scale runs; "
        "engine logs go to this process's output, each line naming its pod",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if not args.shared:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        return run(args)
    from aissim import shared

    handler = logging.StreamHandler()
    handler.addFilter(shared.PodLogFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(pod)s]: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    return asyncio.run(shared.run(args))
