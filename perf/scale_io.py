"""The readings perf/scale.py takes: processes, binds seen through a watch, API server metrics, load.

Why a module of its own: perf/scale.py is the run's order of events; everything that touches a process,
the API server or an engine is here, each function doing one reading or one action, so a reading can be
reused (a smoke test, the demo) and the arithmetic stays pure in perf/scale_figures.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import urllib3
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from ascend_operator.api.constants import GROUP, LABEL_SERVICE, PLURAL, VERSION
from ascend_operator.api.parse import parse_resource
from ascend_operator.render.pod import Owner, build_pod
from harness.procs import rss_bytes
from perf import scale_figures as fig

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "dsv4-flash.yaml"
CRD = ROOT / "crds" / "inference.ascend.dev_ascendinferenceservices.yaml"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def service_body(name: str) -> dict[str, Any]:
    """examples/dsv4-flash.yaml under another name: one replica, a whole Atlas node's 8 NPUs."""
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"]["name"] = name
    return body


def direct_pod(name: str, namespace: str) -> dict[str, Any]:
    """The pod the operator would create for `service_body(name)`, built by the operator's own renderer."""
    parsed = parse_resource(service_body(name), default_namespace=namespace)
    return build_pod(parsed.spec, owner=Owner(name=name, namespace=namespace), replica=0)


@dataclass
class Proc:
    """A process this run started; stopped by its own PID."""

    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def cpu(self) -> float:
        return fig.cpu_seconds(Path(f"/proc/{self.pid}/stat").read_text(), CLOCK_TICKS)

    def rss(self) -> int:
        return rss_bytes(Path(f"/proc/{self.pid}/status").read_text())

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def start(module: str, args: list[str], *, log: Path, env: dict[str, str]) -> Proc:
    """`python -m module args`, output to `log`."""
    out = log.open("ab")
    popen = subprocess.Popen(
        [sys.executable, "-m", module, *args], env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
    )
    return Proc(popen=popen, log=log)


@dataclass
class BindWatch:
    """First time (monotonic) each service's pod was seen with spec.nodeName, through a watch on a namespace."""

    core: client.CoreV1Api
    namespace: str
    bound: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _started: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        w = watch.Watch()  # type: ignore[no-untyped-call]
        while not self._stop.is_set():
            stream = w.stream(self.core.list_namespaced_pod, self.namespace, timeout_seconds=5)  # type: ignore[no-untyped-call]
            self._started.set()
            try:
                for event in stream:
                    pod = event["object"]
                    service = (pod.metadata.labels or {}).get(LABEL_SERVICE)
                    if service and pod.spec.node_name and service not in self.bound:
                        self.bound[service] = time.monotonic()
                    if self._stop.is_set():
                        w.stop()  # type: ignore[no-untyped-call]
            except (ApiException, urllib3.exceptions.HTTPError) as exc:
                # a busy API server answers "Too large resource version" with 504: a fresh watch without a
                # resourceVersion opens with every pod as ADDED, so no bind is lost
                print(f"bind watch of {self.namespace} restarts after: {exc}".splitlines()[0], file=sys.stderr)
                w = watch.Watch()  # type: ignore[no-untyped-call]
                time.sleep(0.2)

    def __enter__(self) -> BindWatch:
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"bind-watch-{self.namespace}")
        self._thread.start()
        self._started.wait(30)
        time.sleep(0.5)  # the watch request is on the wire before the first create
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def create_and_bind(
    core: client.CoreV1Api, namespace: str, names: list[str], create: Callable[[str], object], *, timeout: float
) -> list[float]:
    """Create one object per name, one after another (each stamped just before its call), and return the
    seconds from each create call to its pod being bound."""
    created: dict[str, float] = {}
    with BindWatch(core, namespace) as bw:
        for name in names:
            created[name] = time.monotonic()
            create(name)
        deadline = time.monotonic() + timeout
        while len(bw.bound) < len(names) and time.monotonic() < deadline:
            time.sleep(0.1)
        return fig.latencies(created, dict(bw.bound))


def create_pod(core: client.CoreV1Api, namespace: str) -> Callable[[str], object]:
    return lambda name: core.create_namespaced_pod(namespace, direct_pod(name, namespace))  # type: ignore[arg-type]


def create_service(custom: client.CustomObjectsApi, namespace: str) -> Callable[[str], object]:
    return lambda name: custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, service_body(name))


def delete_pods(core: client.CoreV1Api, namespace: str, *, timeout: float) -> None:
    """Force-delete every pod of a namespace (no kubelet finishes a graceful delete) and wait until gone."""
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    deadline = time.monotonic() + timeout
    while core.list_namespaced_pod(namespace).items:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods of {namespace} still there after {timeout}s")
        time.sleep(0.5)


def ready_count(custom: client.CustomObjectsApi, namespace: str) -> int:
    """Services whose Ready condition is True."""
    listed: dict[str, Any] = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)  # type: ignore[assignment]
    items: list[dict[str, Any]] = listed["items"]
    return sum(
        1
        for item in items
        if any(
            c["type"] == "Ready" and c["status"] == "True" for c in (item.get("status") or {}).get("conditions") or []
        )
    )


def apiserver_counts(kubectl: Callable[..., str]) -> dict[fig.Key, float]:
    """apiserver_request_total from the API server's own /metrics (`kubectl get --raw`, admin credentials)."""
    return fig.request_counts(kubectl("get", "--raw", "/metrics"))


def roll_messages(custom: client.CustomObjectsApi, namespace: str) -> list[str]:
    """status.lastRoll.message of every service that rolled a pod (a stall's says how long nothing advanced
    when the operator judged it, against the seconds from the hang to the deletion)."""
    listed: dict[str, Any] = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)  # type: ignore[assignment]
    rolls = [((item.get("status") or {}).get("lastRoll") or {}) for item in listed["items"]]
    return [str(r.get("message", "")) for r in rolls if r]


def pod_endpoints(core: client.CoreV1Api, namespace: str) -> list[str]:
    """http://<pod IP>:8000 of every pod of the namespace that has an IP."""
    pods = core.list_namespaced_pod(namespace).items
    return [f"http://{p.status.pod_ip}:8000" for p in pods if p.status is not None and p.status.pod_ip]


def probe_bound(
    core: client.CoreV1Api, namespace: str, create: Callable[[str], object], name: str
) -> tuple[float, float, float]:
    """Create one object and return the seconds from the create call until the call returned, until its pod
    was first seen and until it was bound (for a CR: its own write, then the operator's share, then the
    scheduler's). Timed by a
    watch on that one pod's label, opened before the create, so neither a poll's period nor a LIST of the
    fleet's pods is in the figure (a polled LIST of a 200-pod namespace lagged the bind by ~50 ms). For one
    new service on a running fleet, where a burst's watch would measure throughput, not reaction."""
    selector = f"{LABEL_SERVICE}={name}"
    # returns once the API server answered with the watch's headers: the watch is open before the create
    resp: Any = core.list_namespaced_pod(
        namespace, label_selector=selector, watch=True, timeout_seconds=120, _preload_content=False
    )
    try:
        start = time.monotonic()
        create(name)
        called = time.monotonic() - start
        seen: float | None = None
        for line in watch.watch.iter_resp_lines(resp):  # type: ignore[no-untyped-call]
            now = time.monotonic() - start
            event = json.loads(line)
            if event.get("type") not in ("ADDED", "MODIFIED"):
                continue
            seen = now if seen is None else seen
            if ((event.get("object") or {}).get("spec") or {}).get("nodeName"):
                return called, seen, now
    finally:
        resp.close()
    raise TimeoutError(f"{namespace}/{name}: no pod bound within 120 s")


def _pods(core: client.CoreV1Api, namespace: str) -> list[dict[str, Any]]:
    listed = core.api_client.sanitize_for_serialization(core.list_namespaced_pod(namespace))
    return list(listed.get("items") or [])


def stall_to_roll(core: client.CoreV1Api, namespace: str, *, timeout: float = 180.0) -> float | None:
    """Hang one engine (the simulator's `hang` fault: no step completes, /health still 200) and return the
    seconds until the operator deletes its pod (the roll); None when it did not within `timeout`."""
    victim = min((p for p in _pods(core, namespace) if p["status"].get("podIP")), key=lambda p: p["metadata"]["name"])
    uid = victim["metadata"]["uid"]
    request = urllib.request.Request(
        f"http://{victim['status']['podIP']}:8000/sim/faults",
        json.dumps({"fault": "hang"}).encode(),
        {"Content-Type": "application/json"},
    )
    name = victim["metadata"]["name"]
    start = time.monotonic()
    urllib.request.urlopen(request, timeout=10).close()
    while time.monotonic() - start < timeout:
        # the one pod, by name, as JSON: a LIST of a 200-pod namespace built into models every 0.5 s took
        # most of a core from the operator it was timing
        try:
            resp: Any = core.read_namespaced_pod(name, namespace, _preload_content=False)
            pod: dict[str, Any] | None = json.loads(resp.data)
        except ApiException as exc:
            if exc.status != 404:
                raise
            pod = None
        if pod is None or pod["metadata"]["uid"] != uid or pod["metadata"].get("deletionTimestamp"):
            return time.monotonic() - start
        time.sleep(0.5)
    return None


@dataclass
class Load:
    """A light open-loop load: `rate` short completions per second, round-robin over the engines."""

    endpoints: list[str]
    rate: float
    sent: int = 0
    ok: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _wake: Callable[[], object] = lambda: None

    async def _run(self) -> None:
        body = {"model": "deepseek-v4-flash", "prompt": "Summarise the scale run.", "max_tokens": 16}
        pending: set[asyncio.Task[None]] = set()
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._wake = lambda: loop.call_soon_threadsafe(stopped.set)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:

            async def one(url: str) -> None:
                try:
                    async with session.post(url + "/v1/completions", json=body) as resp:
                        await resp.read()
                        self.ok += resp.status == 200
                except (aiohttp.ClientError, TimeoutError):
                    pass

            start = time.monotonic()
            while not self._stop.is_set():
                url = self.endpoints[self.sent % len(self.endpoints)]
                self.sent += 1
                task = asyncio.create_task(one(url))
                pending.add(task)
                task.add_done_callback(pending.discard)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopped.wait(), max(0.0, start + self.sent / self.rate - time.monotonic()))
            await asyncio.gather(*pending, return_exceptions=True)

    def __enter__(self) -> Load:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True, name="scale-load")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout=60)


def wait_live(url: str, proc: Proc, *, timeout: float) -> None:
    """Until the operator's kopf liveness endpoint answers (it starts after the handlers and watches)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if proc.popen.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"operator not live at {url} (exit {proc.popen.poll()}); see {proc.log}")
        time.sleep(0.3)


def pass_histogram(url: str) -> fig.PassHistogram:
    """The operator's pass durations (its /metrics at `url`)."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        return fig.pass_histogram(resp.read().decode())


def dump(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
