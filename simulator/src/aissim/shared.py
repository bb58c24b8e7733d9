"""`aissim attach --shared`: every engine pod's simulator inside ONE process, one server per pod IP.

Why: `aissim attach` starts one `aissim serve` process per pod, ~40 MB of interpreter each, so a scale run
of 200 services would need ~8 GB and 200 processes on a 2-core machine. Here each pod gets what `aissim
serve` would run, through the same `runtime.launch()` (so the same /health, /v1/*, /metrics and /sim routes,
the same start-up order and the same faults), bound to the pod's own IP:port inside one asyncio loop.
Each engine has its own SimEngine: clock, scheduler, KV pool, fault state and metrics registry, so a
`hang` injected into one pod's engine leaves every other pod untouched.

What was a process exit becomes an engine exit: the `crash` fault, a KV budget refusal and a bad command
line end that pod's engine only (with the exit code `serve` would have returned), and `sync` restarts it
after a back-off, as a kubelet restarts a container, and writes what the kubelet would into the pod's status
(`kubelet_status`: the container not ready and its last state terminated with the exit code, the restart count
up when it runs again, ready again once it answers), so a crash shows on the pod as on a cluster; the
back-off is `attach`'s (1 s) unless `AIS_RESTART_BACKOFF_SECONDS` says otherwise (the kubelet's first is 10 s,
pkg/kubelet/kubelet.go backOffPeriod). An engine stops as soon as its pod is gone or terminating, and before
a pod's engine binds, an engine still holding that address for an older pod is stopped: a cluster hands a pod
IP out again only once the old sandbox is torn down (the soak once saw a successor unable to bind its IP for
70 s while the engine of the pod that had it answered in its place). What cannot
be had in one process: stopping one pod's engine with a signal (SIGSTOP on a headless worker, as
tests/e2e/test_multinode.py does) stops them all; use the `hang` fault, or per-process `attach`, for that.
The pods come from pods.py, as attach.py's do; the two supervisors share it and import nothing of each other.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from kubernetes import client

from aissim.args import ArgsError, UnrecognizedArguments, parse_serve_args
from aissim.faults import FaultError, parse_fault_flag
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
from aissim.runtime import Running, launch
from ascend_operator.api.constants import ENGINE_CONTAINER

log = logging.getLogger("aissim.shared")

#: The pod an engine task serves, for log lines (engine tasks inherit it; HTTP handler tasks do not).
POD: contextvars.ContextVar[str] = contextvars.ContextVar("aissim_pod", default="-")

#: Wall seconds a stopping engine lets in-flight requests finish (a container's SIGTERM grace, shortened:
#: a pod that is gone has no clients left that matter).
STOP_GRACE_SECONDS = 1.0


#: What happened to a pod's engine container, as the kubelet reports it: it exited (with this code), it was
#: started again after the back-off, it answers again.
ContainerEvent = Literal["exited", "restarted", "answering"]
StatusWriter = Callable[[Target, ContainerEvent, "int | str | None"], None]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def container_status(
    pod: Mapping[str, Any], event: ContainerEvent, code: int | str | None, *, backoff: float
) -> dict[str, Any]:
    """The status patch the kubelet writes for `event` of the engine container (pkg/kubelet/status: the
    container statuses replace the list, conditions merge by type): exited is not ready, waiting in
    CrashLoopBackOff, its last state terminated with the exit code; restarted runs again, restartCount + 1,
    not started nor ready until its probes pass; answering is started (the startup probe) and ready (KWOK's
    pod-gates-ready then sets Ready once the operator's gate is True too, hack/kwok/pod-stages.yaml)."""
    now, status = _now(), pod.get("status") or {}
    statuses = [dict(c) for c in status.get("containerStatuses") or []]
    engine = next((c for c in statuses if c.get("name") == ENGINE_CONTAINER), None)
    if engine is None:
        engine = {"name": ENGINE_CONTAINER, "image": "", "imageID": "", "restartCount": 0}
        statuses.append(engine)
    ready = event == "answering"
    if event == "exited":
        started = ((engine.get("state") or {}).get("running") or {}).get("startedAt") or now
        exit_code = code if isinstance(code, int) else 137
        engine["lastState"] = {"terminated": {"exitCode": exit_code, "reason": "Error", "startedAt": started,
                                              "finishedAt": now}}  # fmt: skip
        message = f"back-off {backoff:g}s restarting failed container={ENGINE_CONTAINER}"
        engine["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
        engine["started"] = False
    elif event == "restarted":
        engine["restartCount"] = int(engine.get("restartCount") or 0) + 1
        engine["state"] = {"running": {"startedAt": now}}
        engine["started"] = False  # until its startup probe passes: the engine answers (loaded)
    else:
        engine["started"] = True
    engine["ready"] = ready
    every_ready = all(bool(c.get("ready")) for c in statuses)
    conditions: list[dict[str, Any]] = [
        {"type": "ContainersReady", "status": "True" if every_ready else "False", "lastTransitionTime": now,
         "reason": "" if every_ready else "ContainersNotReady", "message": ""},
    ]  # fmt: skip
    if not every_ready:
        unready = f"containers with unready status: [{ENGINE_CONTAINER}]"
        conditions.append({"type": "Ready", "status": "False", "lastTransitionTime": now,
                           "reason": "ContainersNotReady", "message": unready})  # fmt: skip
    return {"status": {"containerStatuses": statuses, "conditions": conditions}}


def kubelet_status(core: client.CoreV1Api, *, backoff: float) -> StatusWriter:
    """Write a container event into the pod's status through the API (blocking: run it in a thread)."""

    def write(target: Target, event: ContainerEvent, code: int | str | None) -> None:
        pod = core.api_client.sanitize_for_serialization(core.read_namespaced_pod_status(target.name, target.namespace))
        if (pod.get("metadata") or {}).get("uid") != target.uid:
            return  # the pod was replaced meanwhile
        core.patch_namespaced_pod_status(
            target.name, target.namespace, container_status(pod, event, code, backoff=backoff)
        )

    return write


def _ignore(running: Running) -> None:
    """No one to tell that the engine is up."""


class PodLogFilter(logging.Filter):
    """Adds `pod` (namespace/name of the engine that logged, or `-`) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.pod = POD.get()
        return True


@dataclass(eq=False)
class Slot:
    """One pod's engine: the task that runs it and, once it ended, when."""

    target: Target
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    running: Running | None = None
    """The engine while it is up (tests and the RSS figures read it)."""
    up: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the engine serves."""
    exited_at: float | None = None
    task: asyncio.Task[int] = field(init=False)


async def serve_target(
    target: Target, *, env: Mapping[str, str], stop: asyncio.Event, on_start: Callable[[Running], None] = _ignore
) -> int:
    """Run `aissim serve <pod args>` on the pod's IP:port until `stop` is set; returns serve's exit code."""
    POD.set(f"{target.namespace}/{target.name}")
    if target.args[:1] != ("serve",):  # `aissim <args>` as attach runs it: only `serve` starts an engine
        log.error("aissim: unknown command %r", target.args[:1])
        return 2
    try:
        cfg = parse_serve_args(target.args[1:], env=env)
        for spec in cfg.sim.faults:
            parse_fault_flag(spec)
    except UnrecognizedArguments as err:  # serve prints vLLM's argparse error and exits 2
        log.error("%s", err)
        return 2
    except (ArgsError, FaultError) as err:
        log.error("aissim serve: %s", err)
        return 2
    cfg = replace(cfg, host=target.ip, port=target.port)
    exit_codes: list[int] = []

    def exit_fn(code: int) -> None:  # the crash fault: this engine ends, the process does not
        exit_codes.append(code)
        stop.set()

    try:
        started = await launch(cfg, exit_fn=exit_fn, shutdown_timeout=STOP_GRACE_SECONDS)
    except OSError as err:  # e.g. the address is still taken: serve would die of the traceback
        log.error("cannot bind %s:%d: %s", target.ip, target.port, err)
        return 1
    if isinstance(started, str):
        log.error("%s", started)
        return 1
    on_start(started)
    try:
        await stop.wait()
    finally:
        await started.close()
    return exit_codes[0] if exit_codes else 0


@dataclass
class EngineHost:
    """The engines of one shared process, kept in step with the pods by `sync`."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    """The environment every engine parses (AIS_SIM_*), as a child process would inherit it."""
    secrets: SecretEnv = no_secrets
    slots: dict[str, Slot] = field(default_factory=dict)
    backoff: float = RESTART_BACKOFF_SECONDS
    """Seconds from an engine's exit to its restart (the kubelet's crash back-off)."""
    kubelet: StatusWriter | None = None
    """Where a container's exit, restart and readiness are reported (the pod's status); None: nowhere."""
    _writes: set[asyncio.Task[None]] = field(default_factory=set)
    superseded: set[str] = field(default_factory=set)
    """Pods (uid) still listed whose address a newer pod was given: never started again."""

    def _report(self, target: Target, event: ContainerEvent, code: int | str | None = None) -> None:
        """Write the kubelet's view of a container event, in the background (the API may be restarting)."""
        if self.kubelet is None:
            return
        write = self.kubelet

        async def go() -> None:
            try:
                await asyncio.to_thread(write, target, event, code)
            except Exception as exc:  # the pod may be gone, the API down: the next event writes again
                log.warning("status of %s/%s (%s) not written: %s", target.namespace, target.name, event, exc)

        task = asyncio.create_task(go())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    def _start(self, target: Target, *, restart: bool = False) -> Slot:
        slot = Slot(target=target)

        def up(running: Running) -> None:
            slot.running = running
            slot.up.set()
            self._report(target, "answering")  # its startup probe passes: started, and ready (first run too)

        async def run() -> int:
            try:
                secret_env = await asyncio.to_thread(self.secrets, target)
            except Exception as exc:  # a Secret the API will not give: the container does not start
                log.warning("env of %s/%s: %s", target.namespace, target.name, exc)
                return 1
            try:
                return await serve_target(target, env={**self.env, **secret_env}, stop=slot.stop, on_start=up)
            finally:
                slot.running = None

        log.info("sim for %s/%s on %s:%d (shared)", target.namespace, target.name, target.ip, target.port)
        slot.task = asyncio.create_task(run(), name=f"sim-{target.namespace}-{target.name}")
        return slot

    async def sync(self, targets: list[Target], *, now: float) -> None:
        """Make the running engines match the pods: start new ones, stop gone ones, restart exited ones."""
        listed = {t.uid for t in targets}
        self.superseded &= listed
        new = {(t.ip, t.port) for t in targets if t.uid not in self.slots and t.uid not in self.superseded}
        # a pod whose address a newer pod now has: its sandbox is gone, whatever the listing still says
        self.superseded |= {u for u, s in self.slots.items() if u in listed and (s.target.ip, s.target.port) in new}
        wanted = {t.uid: t for t in targets if t.uid not in self.superseded}
        gone = [self.slots.pop(uid) for uid in [u for u in self.slots if u not in wanted]]
        for old in gone:
            t = old.target
            log.info("sim for %s/%s on %s:%d stopped: its pod is gone, terminating or its address reused",
                     t.namespace, t.name, t.ip, t.port)  # fmt: skip
        await asyncio.gather(*(self._stop(old) for old in gone))
        for uid, target in wanted.items():
            slot = self.slots.get(uid)
            if slot is None:
                self.slots[uid] = self._start(target)
            elif slot.task.done():
                if slot.exited_at is None:
                    slot.exited_at = now
                    code = _exit_code(slot.task)
                    log.info("sim for %s exited with %s", target.name, code)
                    self._report(target, "exited", code)
                elif now - slot.exited_at >= self.backoff:
                    self._report(target, "restarted")
                    self.slots[uid] = self._start(target, restart=True)

    async def _stop(self, slot: Slot) -> None:
        slot.stop.set()
        if slot.running is None:  # still loading (or reading its Secret): nothing to drain, stop it now
            slot.task.cancel()
        await asyncio.gather(slot.task, return_exceptions=True)

    async def close(self) -> None:
        """Stop every engine."""
        slots, self.slots = list(self.slots.values()), {}
        await asyncio.gather(*(self._stop(slot) for slot in slots))

    def targets(self) -> list[Target]:
        """The pods this host runs (or restarts) an engine for."""
        return [slot.target for slot in self.slots.values()]

    def engines(self) -> dict[str, Running]:
        """uid -> the running engine, for pods whose engine is up."""
        return {uid: slot.running for uid, slot in self.slots.items() if slot.running is not None}


def _exit_code(task: asyncio.Task[int]) -> int | str:
    if task.cancelled():
        return "cancelled"
    exc = task.exception()
    return repr(exc) if exc is not None else task.result()


async def run(args: argparse.Namespace) -> int:
    """`aissim attach --shared`: poll the pods (in a thread: the client blocks) and keep the engines in step."""
    core, api = connect(args.kubeconfig)
    backoff = float(os.environ.get("AIS_RESTART_BACKOFF_SECONDS", RESTART_BACKOFF_SECONDS))
    host = EngineHost(secrets=secret_reader(core), backoff=backoff, kubelet=kubelet_status(core, backoff=backoff))
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    try:
        while not stopping.is_set():
            try:
                targets = await asyncio.to_thread(list_targets, core, api, args.namespace)
                await host.sync(targets, now=time.monotonic())
            except API_UNREACHABLE as exc:  # the API server restarting is not fatal here
                log.warning("listing pods failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), args.interval)
    finally:
        await host.close()
    return 0
