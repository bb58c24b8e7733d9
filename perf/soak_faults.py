"""The chaos soak's fault catalogue: each kind, how it is injected the way it happens on a cluster, and how
it is taken back once the soak has measured it.

Why these forms (each the same as the drill that tests it alone):
- engine faults go through the simulator's /sim/faults on the pod's own engine (tests/e2e/test_health.py,
  test_drills.py): `hang` (everything stops, /health 200), `kv-stall` (stall-at-kv with a threshold the
  soak's own load passes, so no forward progress while requests wait), `drift` (step time +50% over 30
  engine seconds), `crash` (the engine exits; the simulator restarts it after the kubelet's back-off);
- `npu-fault`: the device plugin's report of the pod's node with a chip at SeparateNPU, its annotation of
  the chips it mounted, and the node's allocatable NPUs one down, as tests/e2e/test_npu_faults.py writes
  them (the plugin's own layout and CheckCode; harness/plant.py); repaired after recovery (report cleared,
  8 NPUs again);
- `operator-kill`: SIGKILL of the operator, started again after a few seconds (a crashed pod restarted);
- `apiserver-restart`: SIGKILL of kube-apiserver by its recorded PID, started again with the same command
  line (test_drills.py), down for a few seconds;
- `kv-transfer-hang`: on a decode engine of the soak's P/D service (`/sim/faults` `kv-transfer-hang`, as
  tests/e2e/test_disaggregation.py injects it): requests whose KV comes from the prefill engine wait there
  for ever while the engine answers everything else;
- `node-loss`: harness/cluster.py `lose_node` (tests/e2e/test_node_lost.py's drill): KWOK stops playing the
  node's kubelet, and every engine on the node stops answering (the simulator's `unreachable`); the node is
  given back once the fault is closed.
"""

from __future__ import annotations

import json
import random
import signal
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from harness.cluster import (
    Cluster,
    kill_component,
    lose_node,
    pid_running,
    recorded_pids,
    restart_component,
    wait_for,
)
from harness.plant import (
    Proc,
    chip_fault,
    liveness_port,
    mount_chips,
    plugin_report,
    set_allocatable,
    sim,
    start_operator,
)
from perf.soak_watch import ENGINE_PORT, Picture, PodSeen, RollSeen

#: Engine faults: /sim/faults bodies.
ENGINE_FAULTS: dict[str, dict[str, Any]] = {
    "hang": {"fault": "hang"},
    # any KV in use passes it: the soak's clients keep requests running on every engine
    "kv-stall": {"fault": "stall-at-kv", "threshold": 0.0001},
    "drift": {"fault": "drift", "fraction": 0.5, "period_s": 30},
    "crash": {"fault": "crash", "exit_code": 1},
    "kv-transfer-hang": {"fault": "kv-transfer-hang"},
}
POD_FAULTS = (*ENGINE_FAULTS, "npu-fault", "node-loss")
CLUSTER_FAULTS = ("operator-kill", "apiserver-restart")
ALL_KINDS = (*POD_FAULTS, *CLUSTER_FAULTS)
#: Faults only a P/D decode engine can have.
DECODE_FAULTS = ("kv-transfer-hang",)
SEPARATE = chip_fault("Ascend910-4", "SeparateNPU", "A8028801,80E18402")
#: What a kubelet would restart on a real control plane (static pods); the API server and etcd are the soak's.
RESTARTED = ("kube-controller-manager", "kube-scheduler", "kwok")


def available(kind: str, *, pd: bool) -> str | None:
    """None if the soak can draw `kind`, else why not."""
    if kind in DECODE_FAULTS and not pd:
        return "needs a P/D pair of engines (--no-pd)"
    return None


@dataclass
class Fault:
    """One injected fault and what became of it (seconds since the run's start)."""

    kind: str
    injected: float
    service: str = ""
    pod: str = ""
    uid: str = ""
    node: str = ""
    detected: float | None = None
    rolled: float | None = None
    roll_reason: str = ""
    recovered: float | None = None
    missed: bool = False
    closed: float | None = None
    """When the fault stopped blocking its service: recovered, or a missed one taken back by hand."""
    restore: Callable[[], None] | None = None

    @property
    def open(self) -> bool:
        return self.closed is None

    def record(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "restore"}


@dataclass
class Plant:
    """What the injectors act on: the cluster, its namespace, the operator process (replaced on a kill)."""

    cluster: Cluster
    namespace: str
    operator: Proc | None
    operator_log: Path
    operator_args: tuple[str, ...]

    #: start_operator's liveness port for this process (port_base + pid % 1000)
    port_base: int = 19080

    @property
    def liveness_port(self) -> int:
        return liveness_port(self.port_base)

    def restart_operator(self) -> None:
        self.operator = start_operator(self.cluster, self.operator_log, *self.operator_args, port_base=self.port_base)


class Supervisor:
    """Restarts a control-plane component that exited, as the kubelet restarts a static pod. Without this,
    the first API server restart left every later pod Pending (the soak's first run: kube-scheduler gone).
    Why they exit is not the leader lease (hack/local-cluster runs them with --leader-elect=false): a 25 s API
    server outage 40 s after start leaves every component running (2026-12-05, 145 s watched); one within
    seconds of start ends kube-controller-manager ("Error building controllers": it cannot create a
    controller's client), and the soak's case was not caught in a log. A real control plane restarts them.
    The command lines are read from /proc while the components run (harness/cluster.py kill_component's way)."""

    def __init__(self, cluster: Cluster) -> None:
        assert cluster.state_dir is not None
        self.state_dir = cluster.state_dir
        self.argv = {
            name: [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
            for name, pid in recorded_pids(cluster.state_dir).items()
            if name in RESTARTED
        }
        self.restarts: dict[str, int] = {}

    def check(self) -> list[str]:
        """Start again what exited; the names restarted."""
        pids = recorded_pids(self.state_dir)
        dead = [name for name in self.argv if not pid_running(pids.get(name, -1))]
        for name in dead:
            restart_component(self.state_dir, name, self.argv[name])
            self.restarts[name] = self.restarts.get(name, 0) + 1
        return dead


def _base(pod: PodSeen) -> str:
    return f"http://{pod.ip}:{ENGINE_PORT}"


def inject_pod_fault(plant: Plant, kind: str, pod: PodSeen, now: float, *, pic: Picture | None = None) -> Fault:
    fault = Fault(kind=kind, injected=now, service=pod.service, pod=pod.name, uid=pod.uid, node=pod.node)
    if kind in ENGINE_FAULTS:
        sim(_base(pod), "POST", ENGINE_FAULTS[kind])
    elif kind == "npu-fault":
        c, node = plant.cluster, pod.node
        mount_chips(c, plant.namespace, pod.name)
        set_allocatable(c, node, 7)
        plugin_report(c, node, [SEPARATE])

        def repair() -> None:
            plugin_report(c, node, [])
            set_allocatable(c, node, 8)

        fault.restore = repair
    elif kind == "node-loss":
        on_node = [p for p in (pic.pods.values() if pic else [pod]) if p.node == pod.node and p.gone_at is None]
        engines = sorted({_base(p) for p in on_node if p.ip})
        fault.restore = lose_node(plant.cluster, pod.node, unreachable=engines).restore
    else:
        raise ValueError(f"not a pod fault: {kind}")
    return fault


def api_ready(c: Cluster) -> bool:
    return c.kubectl("get", "--raw", "/readyz", check=False, timeout=10).strip() == "ok"


def liveness_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def inject_cluster_fault(plant: Plant, kind: str, rng: random.Random, now: Callable[[], float]) -> Fault:
    """Take the operator or the API server away for 3-10 s and bring it back; returns once it serves again
    (the operator's liveness endpoint answers, kopf's own probe; the API server's /readyz is ok), which is
    when the fault counts as recovered. What it cost the services shows in the other faults' figures and in
    the false rolls and lost requests."""
    fault = Fault(kind=kind, injected=now())
    down = rng.uniform(3.0, 10.0)
    if kind == "operator-kill":
        assert plant.operator is not None
        plant.operator.stop(signal.SIGKILL)
        time.sleep(down)  # the outage itself: nothing to wait for
        plant.restart_operator()
        url = f"http://127.0.0.1:{plant.liveness_port}/healthz"
        wait_for(lambda: liveness_ok(url), timeout=180, interval=0.5, message="the operator live again")
    elif kind == "apiserver-restart":
        c = plant.cluster
        assert c.state_dir is not None
        argv = kill_component(c.state_dir, "kube-apiserver")
        time.sleep(down)  # the outage itself: nothing to wait for
        restart_component(c.state_dir, "kube-apiserver", argv)
        wait_for(lambda: api_ready(c), timeout=180, interval=1, message="kube-apiserver back")
    else:
        raise ValueError(f"not a cluster fault: {kind}")
    fault.recovered = fault.closed = now()
    return fault


def _detected_at(fault: Fault, pod: PodSeen | None, roll: RollSeen | None) -> float | None:
    """The first sign, after the injection, that the operator saw the fault: its gate fell, the pod was
    deleted or went, or a roll was recorded (times as the watcher saw them)."""
    signs = [roll.seen_at if roll is not None else None]
    if pod is not None:
        signs += [pod.fell_at, pod.deleting_at, pod.gone_at]
    after = [t for t in signs if t is not None and t >= fault.injected]
    return min(after) if after else None


def update(fault: Fault, pic: Picture, *, replicas: int, detect_timeout: float) -> None:
    """Advance one open fault from what the watcher saw: detected (`_detected_at`), rolled (its roll record),
    recovered (its service serves all its replicas again, the faulted pod among them only if it recovered in
    place); a pod fault not detected within `detect_timeout` is missed. A cluster fault was recovered by
    the time its injection returned (`inject_cluster_fault`)."""
    now = pic.now()
    if fault.kind in CLUSTER_FAULTS:  # recovered when it served again (inject_cluster_fault)
        return
    if fault.missed:  # taken back by hand: closed once its service serves all its replicas again
        if len(pic.serving(fault.service)) == replicas:
            fault.closed = now
        return
    pod, roll = pic.pods.get(fault.uid), pic.rolls.get(fault.uid)
    if roll is not None and fault.rolled is None:
        fault.rolled, fault.roll_reason = roll.seen_at, roll.reason
    if fault.detected is None:
        fault.detected = _detected_at(fault, pod, roll)
    if fault.detected is None:
        fault.missed = now - fault.injected > detect_timeout
        return
    serving = pic.serving(fault.service)
    in_place = any(p.uid == fault.uid for p in serving)
    if len(serving) == replicas and (in_place or fault.rolled is not None or pod is None or pod.gone_at is not None):
        fault.recovered = fault.closed = now


def clear_engine_fault(pod: PodSeen) -> None:
    """Take a missed engine fault back (DELETE /sim/faults), so the pod serves again; the miss is counted."""
    try:
        sim(_base(pod), "DELETE")
    except (aiohttp.ClientError, OSError, TimeoutError):  # the engine may be gone by now
        return


def fault_json(faults: list[Fault]) -> str:
    return json.dumps([f.record() for f in faults], indent=2)
