"""`aissim attach`, one process per engine: give every engine pod of a (KWOK) cluster a simulator, as a kubelet
would a container.

It watches the pods the operator owns through the kubeconfig and, for each running pod with an IP,
starts `aissim serve` with the pod's own rendered args, bound to the pod's 127.x IP and engine port.
When the pod goes (or is replaced), its simulator is stopped; a simulator that exits (the `crash` fault)
is restarted after a short back-off, as the kubelet restarts a container. Tests, the demo and users share
this command. Simulator settings reach the children through the AIS_SIM_* environment (see aissim/args.py).
Env vars the engine container takes from a Secret (the API key's secretKeyRef) are read through the API
and handed to the child, as the kubelet resolves them at container start; plain `value` entries are not
(the simulator models none of the profile's variables). Which pods need an engine is pods.py's, shared by
the other supervisor, shared.py (`--shared`: every engine inside one process); cli.py picks one of the two.
With `--engine vllm` each pod gets the real engine instead (vLLM 0.25.1 on CPU with a tiny model, its args
translated by aissim/realengine.py's table); every engine, simulated or real, runs in a process group of its
own, stopped as a group with its pod, so a real engine's EngineCore and Worker processes go with it.
Router pods (`spec.router`) get the real vllm-router from aissim/routers.py, a `Supervisor` polled after the
engines with this module's `sync` over a registry of its own; every process is stopped in one grace.
"""

import argparse
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client

from aissim.pods import (
    API_UNREACHABLE,
    RESTART_BACKOFF_SECONDS,
    SecretEnv,
    Target,
    connect,
    list_targets,
    no_secrets,
    secret_reader,
)

log = logging.getLogger("aissim.attach")


@dataclass
class Child:
    """A running simulator process."""

    target: Target
    process: subprocess.Popen[bytes]
    exited_at: float | None = None


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
    """Ask an engine to stop as the kubelet does: SIGTERM to the container's main process only (the group's
    leader), which shuts its EngineCore and Workers down itself; `reap` kills what is left after the grace.
    A SIGTERM to the whole group killed vLLM's Worker mid-drain and failed the request being drained (CI
    2026-12-03, tests/real: "Worker proc VllmWorker-0 died unexpectedly" 4 s after the SIGTERM)."""
    child.exited_at = now
    if child.process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.process.pid, signal.SIGTERM)


def reap(child: Child, *, now: float, grace: float = STOP_GRACE_SECONDS) -> bool:
    """True once the engine's group is gone: its leader exited (the group is then killed, so no EngineCore
    or Worker is left behind, stopped ones included), or the grace ran out and the group was killed."""
    if child.process.poll() is None and now - (child.exited_at or now) < grace:
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


@dataclass
class Engines:
    """The running engines by pod UID, and those of gone pods still being stopped (a real engine takes
    seconds to exit; the next pod must not wait for it)."""

    children: dict[str, Child] = field(default_factory=dict)
    stopping: list[Child] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)

    def close(self) -> None:
        """Stop every engine together: one grace for all of them, not one after another (an engine with a
        client still attached outlives its SIGTERM, as vLLM's does, until the grace's SIGKILL)."""
        close_all(self)


def close_all(*registries: Engines, grace: float = STOP_GRACE_SECONDS) -> None:
    """Stop the processes of every registry in one grace (engines and routers alike)."""
    now = time.monotonic()
    for child in [c for r in registries for c in r.children.values()]:
        terminate(child, now=now)
    left = [c for r in registries for c in (*r.children.values(), *r.stopping)]
    while left:
        now = time.monotonic()
        left = [c for c in left if not reap(c, now=now, grace=grace)]
        if left:
            time.sleep(0.1)
    for registry in registries:
        registry.children.clear()
        registry.stopping.clear()


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


class Supervisor(Protocol):
    """Processes for pods other than engines (aissim/routers.py: router pods), polled after the engines."""

    running: Engines

    def poll(self, core: client.CoreV1Api, api: client.ApiClient, namespace: str | None) -> bool: ...

    def close(self) -> None: ...


def run(args: argparse.Namespace, others: tuple[Supervisor, ...] = ()) -> int:
    """Poll the pods and keep the simulators (and the other supervisors' processes) in step until interrupted."""
    core, api = connect(args.kubeconfig)
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
            for other in others:
                other.poll(core, api, args.namespace)
            time.sleep(args.interval)
    finally:
        grace = STOP_GRACE_SECONDS if args.exit_grace is None else args.exit_grace
        close_all(engines, *(other.running for other in others), grace=grace)
        for other in others:
            other.close()
    return 0


def realengine_python() -> str:
    from aissim.realengine import find_python

    return find_python()
