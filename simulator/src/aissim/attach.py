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
With `--engine vllm` each pod gets the real engine instead (vLLM 0.25.1 on CPU with a tiny model, its args
translated by aissim/realengine.py's table); every engine, simulated or real, runs in a process group of its
own, stopped as a group with its pod, so a real engine's EngineCore and Worker processes go with it.
"""

import argparse
import asyncio
import base64
import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
#: The engine a target runs: (argv, environment) from the target and its resolved Secret env.
Launcher = Callable[[Target, dict[str, str]], tuple[list[str], dict[str, str]]]


def simulator(target: Target, secret_env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """`aissim serve <pod args>` on the pod's address (AIS_SIM_BIND_*), with the harness's AIS_SIM_* env."""
    env = {**os.environ, **secret_env, "AIS_SIM_BIND_HOST": target.ip, "AIS_SIM_BIND_PORT": str(target.port)}
    return [sys.executable, "-m", "aissim", *target.args], env


def real_engine(python: str, cache: Path) -> Launcher:
    """The real engine (aissim/realengine.py) for each target, `python` being its install's interpreter."""
    from aissim import realengine

    def launch(target: Target, secret_env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        drop = realengine.drop_args(os.environ)
        argv = realengine.command(python, target.args, host=target.ip, port=target.port, cache=cache, drop=drop)
        return argv, realengine.environment(os.environ, secret_env)

    return launch


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


def spawn(
    target: Target, *, log_dir: Path | None, secrets: SecretEnv = no_secrets, launcher: Launcher = simulator
) -> subprocess.Popen[bytes]:
    """Start the target's engine on the pod's address, in a new session (its own process group)."""
    argv, env = launcher(target, secrets(target))
    out: Any = subprocess.DEVNULL
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        out = (log_dir / f"{target.namespace}_{target.name}_{target.uid[:8]}.log").open("ab")
    log.info("engine for %s/%s on %s:%d: %s", target.namespace, target.name, target.ip, target.port, argv[0])
    return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


#: Seconds an engine's group has to exit after SIGTERM (vLLM stops its EngineCore and Worker first).
STOP_GRACE_SECONDS = 15.0


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def terminate(child: Child, *, now: float) -> None:
    """Ask an engine's process group (its PID is the group's id) to stop; `reap` finishes the job."""
    child.exited_at = now
    if child.process.poll() is None:
        _signal_group(child.process.pid, signal.SIGTERM)


def reap(child: Child, *, now: float) -> bool:
    """True once the engine's group is gone: its leader exited (the group is then killed, so no EngineCore
    or Worker is left behind, stopped ones included), or the grace ran out and the group was killed."""
    if child.process.poll() is None and now - (child.exited_at or now) < STOP_GRACE_SECONDS:
        return False
    _signal_group(child.process.pid, signal.SIGKILL)
    child.process.wait()
    return True


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop an engine's process group (its leader's PID is the group's id) now: SIGTERM, the grace, SIGKILL
    to whatever of the group is left, stopped members included."""
    if process.poll() is None:
        _signal_group(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STOP_GRACE_SECONDS)
    _signal_group(process.pid, signal.SIGKILL)
    process.wait()


def stop(child: Child) -> None:
    """Stop one engine now (stop_group)."""
    stop_group(child.process)


@dataclass
class Engines:
    """The running engines by pod UID, and those of gone pods still being stopped (a real engine takes
    seconds to exit; the next pod must not wait for it)."""

    children: dict[str, Child] = field(default_factory=dict)
    stopping: list[Child] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)

    def close(self) -> None:
        for child in [*self.children.values(), *self.stopping]:
            stop(child)
        self.children.clear()
        self.stopping.clear()


def sync(
    engines: Engines,
    targets: list[Target],
    *,
    now: float,
    log_dir: Path | None,
    secrets: SecretEnv = no_secrets,
    launcher: Launcher = simulator,
) -> None:
    """Make the running engines match the pods."""
    wanted = {t.uid: t for t in targets}
    for uid in [u for u in engines.children if u not in wanted]:
        gone = engines.children.pop(uid)
        terminate(gone, now=now)
        engines.stopping.append(gone)
    engines.stopping = [c for c in engines.stopping if not reap(c, now=now)]

    def start(target: Target) -> None:
        try:
            process = spawn(target, log_dir=log_dir, secrets=secrets, launcher=launcher)
        except ValueError as exc:  # the launcher cannot run this pod (logged once, as a kubelet's event)
            if target.uid not in engines.refused:
                engines.refused.add(target.uid)
                log.error("no engine for %s/%s: %s", target.namespace, target.name, exc)
            return
        engines.children[target.uid] = Child(target=target, process=process)

    for uid, target in wanted.items():
        child = engines.children.get(uid)
        if child is None:
            start(target)
        elif child.process.poll() is not None:
            if child.exited_at is None:
                child.exited_at = now
                log.info("engine for %s exited with %s", target.name, child.process.returncode)
            elif now - child.exited_at >= RESTART_BACKOFF_SECONDS:
                reap(engines.children.pop(uid), now=now)  # once: its group id is not signalled again
                start(target)


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
    engines: Engines,
    core: client.CoreV1Api,
    api: client.ApiClient,
    namespace: str | None,
    *,
    log_dir: Path | None,
    launcher: Launcher = simulator,
) -> bool:
    """One listing and sync of the engines; False (logged, engines untouched) when the API is unreachable."""
    try:
        targets = list_targets(core, api, namespace)
        now = time.monotonic()
        sync(engines, targets, now=now, log_dir=log_dir, secrets=secret_reader(core), launcher=launcher)
    except API_UNREACHABLE as exc:
        log.warning("listing pods failed: %s", exc)
        return False
    return True


def run(args: argparse.Namespace) -> int:
    """Poll the pods and keep the simulators in step until interrupted."""
    config.load_kube_config(config_file=args.kubeconfig)
    core = client.CoreV1Api()
    api = client.ApiClient()
    engines = Engines()
    stopping = False
    launcher: Launcher = simulator
    if args.engine == "vllm":
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ascend-operator" / "models"
        launcher = real_engine(args.vllm_python or realengine_python(), Path(args.model_cache or cache))

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log_dir = Path(args.log_dir) if args.log_dir else None
    try:
        while not stopping:
            poll(engines, core, api, args.namespace, log_dir=log_dir, launcher=launcher)
            time.sleep(args.interval)
    finally:
        engines.close()
    return 0


def realengine_python() -> str:
    from aissim.realengine import find_python

    return find_python()


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
    parser.add_argument(
        "--engine", choices=("sim", "vllm"), default="sim",
        help="sim: the simulator (default); vllm: the real engine, vLLM 0.25.1 on CPU with a tiny model, the "
        "pod's args translated by aissim/realengine.py (docs/real-engine.md)",
    )  # fmt: skip
    parser.add_argument(
        "--vllm-python", default=None,
        help="the Python of the real engine's install, as hack/real-vllm.sh prints it (default: $AIS_VLLM_PYTHON)",
    )  # fmt: skip
    parser.add_argument(
        "--model-cache", default=None,
        help="the folder the tiny model is made in (default: ${XDG_CACHE_HOME:-~/.cache}/ascend-operator/models)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.shared and args.engine != "sim":
        parser.error("--shared runs simulators only")
    if not args.shared:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        return run(args)
    from aissim import shared

    handler = logging.StreamHandler()
    handler.addFilter(shared.PodLogFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(pod)s]: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    return asyncio.run(shared.run(args))
