"""Handle on the Kubernetes cluster the e2e suite runs against, driven only through a kubeconfig.

Why it exists: the same tests must run on the local control plane (hack/local-cluster: real etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, KWOK fake Atlas nodes) and on a kind cluster
(hack/kind-e2e.sh). Everything a test needs (kubectl bound to the kubeconfig, adding and removing fake
Atlas nodes, waiting for a condition) goes through this module, so no test knows which one it is on.
The pytest fixtures in conftest.py are thin wrappers over these functions; `make demo` can use them too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
LOCAL_CLUSTER = ROOT / "hack" / "local-cluster"
BUILD_K8S = ROOT / "hack" / "build-k8s.sh"
#: The real engine's install (vLLM 0.25.1 on CPU): the `vllm` stage, whose last line is its Python.
REAL_VLLM = ROOT / "hack" / "real-vllm.sh"
# lws-controller runs only once `hack/local-cluster lws` started it (tests/e2e/test_multinode.py); when it
# did, `down` must stop it like the rest.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "lws-controller")

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """wait_for gave up; an AssertionError so pytest reports it as a test failure with the message."""


def wait_for(predicate: Callable[[], T | None], *, timeout: float, interval: float = 0.5, message: str = "") -> T:
    """Poll `predicate` until it returns something truthy and return it; WaitTimeout after `timeout` s.

    The last exception the predicate raised (e.g. kubectl failing while an object does not exist yet)
    is swallowed while polling and reported in the timeout message.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f"; last error: {last_error}" if last_error else ""
            raise WaitTimeout(f"timed out after {timeout}s waiting for {message or predicate}{detail}")
        time.sleep(interval)


UNREACHABLE = "Unable to connect to the server"
UNREACHABLE_BACKOFF_S = (2.0, 5.0)


class KubectlError(RuntimeError):
    """kubectl exited non-zero; carries stderr so assertions can match the API server's message."""

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)} exited {returncode}: {stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True)
class Cluster:
    """A cluster reachable through `kubeconfig`; `state_dir` is set when this process started it."""

    kubeconfig: Path
    kubectl_bin: str
    state_dir: Path | None = None

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120) -> str:
        """Run kubectl against this cluster and return stdout; raise KubectlError on failure if `check`."""
        cmd = [self.kubectl_bin, f"--kubeconfig={self.kubeconfig}", *args]
        res = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
        for backoff in UNREACHABLE_BACKOFF_S:
            # The request never left kubectl (no connection or no TLS session: nothing applied), which happens when a
            # real engine's prefill starves the local API server of both cores; any client would try again.
            if res.returncode == 0 or UNREACHABLE not in res.stderr:
                break
            time.sleep(backoff)
            res = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise KubectlError(list(args), res.returncode, res.stderr)
        return res.stdout

    def get_json(self, *args: str) -> Any:
        """`kubectl get ARGS -o json`, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def apply(self, manifest: dict[str, Any] | str, *, namespace: str | None = None) -> str:
        """`kubectl apply` a manifest given as a dict (sent as JSON) or as YAML/JSON text."""
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        ns = [f"--namespace={namespace}"] if namespace else []
        return self.kubectl("apply", *ns, "-f", "-", stdin=text)

    def add_nodes(self, count: int) -> list[str]:
        """Add `count` fake Atlas 800 A2 nodes (8 x huawei.com/Ascend910 each), wait until Ready."""
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "AIS_KUBECTL": self.kubectl_bin}
        if self.state_dir is not None:  # its pod net (127.<net>.<node>.x) is recorded in its state dir
            env["AIS_CLUSTER_DIR"] = str(self.state_dir)
        # A cluster we did not start (kind) allocates node pod CIDRs itself and rejects 127.x ones.
        own = [] if self.state_dir is not None else ["--no-pod-cidr"]
        cmd = [str(LOCAL_CLUSTER), "add-nodes", str(count), *own]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"add-nodes failed: {res.stderr.strip()}")
        return res.stdout.split()

    def remove_node(self, name: str) -> None:
        """Delete a node and, at once, the pods bound to it.

        Without a kubelet nothing would finish those pods' graceful deletion; podgc force-deletes pods
        of a vanished node only after a 40 s quarantine, so this does the same without the wait.
        """
        self.kubectl("delete", "node", name, "--wait=true", "--timeout=60s")
        self.kubectl(
            "delete",
            "pods",
            "--all-namespaces",
            f"--field-selector=spec.nodeName={name}",
            "--grace-period=0",
            "--force",
            "--wait=false",
        )

    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.get_json("nodes")["items"]]

    def pids(self) -> dict[str, int]:
        """Control-plane PIDs this process started (empty for an existing cluster), from the pid files."""
        if self.state_dir is None:
            return {}
        return recorded_pids(self.state_dir)


def recorded_pids(state_dir: Path) -> dict[str, int]:
    """component -> PID as hack/local-cluster recorded them (first line of logs pid files)."""
    pids: dict[str, int] = {}
    for name in COMPONENTS:
        pid_file = state_dir / "pids" / f"{name}.pid"
        if pid_file.exists():
            pids[name] = int(pid_file.read_text().split()[0])
    return pids


def pid_running(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill_component(state_dir: Path, name: str) -> list[str]:
    """SIGKILL one control-plane component of a local cluster by its recorded PID; return its command line.

    For the reliability drills (tests/e2e/test_drills.py): the command line is read from /proc before the
    kill, so restart_component starts the same binary with the same flags (ports, data dir, certificates).
    """
    pid = recorded_pids(state_dir)[name]
    argv = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not pid_running(pid), timeout=30, interval=0.05, message=f"{name} (pid {pid}) gone")
    return argv


def restart_component(state_dir: Path, name: str, argv: list[str]) -> int:
    """Start a component again as hack/local-cluster spawns it (own session, same log, cwd the state dir) and
    record its new PID, so `down` stops it like the others."""
    with (state_dir / "logs" / f"{name}.log").open("ab") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=state_dir, start_new_session=True
        )
    (state_dir / "pids" / f"{name}.pid").write_text(f"{proc.pid}\n{argv[0]}\n")
    return proc.pid


#: The annotation KWOK selects the nodes it plays the kubelet of by (hack/local-cluster starts it with
#: --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake; hack/kwok/atlas-800-a2-node.yaml).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def silence_node(cluster: Cluster, node: str) -> float:
    """Make `node`'s kubelet stop reporting, as a server that lost power or its network: its KWOK annotation
    no longer matches KWOK's selector, and KWOK is restarted (by its recorded PID, same command line) so it
    forgets the node at once. Nothing then renews the node's Lease or its status: the node lifecycle
    controller calls it Unknown and taints it unreachable, as on a real cluster; its pods stay as they were
    in the API (Running, until something deletes them, and then Terminating forever). Other nodes' pods
    are untouched (KWOK keeps what a pod's status already says), but the restarted KWOK is a new Lease holder:
    it takes over the other nodes' Leases only once they lapse, up to a renewal period (10 s) late, so for a
    few seconds every node's Lease looks expired (a real kubelet restart keeps its holder, the node's name).
    Returns the wall time the node went silent.
    Only on a local control plane this process started (KWOK is one of its components)."""
    if cluster.state_dir is None:
        raise ValueError("silence_node restarts KWOK: only on a cluster this process started")
    cluster.kubectl("annotate", "node", node, f"{KWOK_NODE_ANNOTATION}=silent", "--overwrite")
    argv = kill_component(cluster.state_dir, "kwok")
    silent_at = time.time()
    restart_component(cluster.state_dir, "kwok", argv)
    return silent_at


@dataclass
class LostNode:
    """A node `lose_node` silenced: since when (wall time), and how to give it back."""

    node: str
    silent_at: float
    resume: Callable[[], None]
    """The engines answer again (those still there); the node stays silent."""
    restore: Callable[[], None]
    """`resume`, and the node managed by KWOK again."""


def _unreachable(url: str, method: str) -> None:
    """Set (POST) or clear (DELETE) an engine's `unreachable` fault through its simulator's /sim/faults."""
    body = json.dumps({"fault": "unreachable"}).encode() if method == "POST" else None
    query = "" if method == "POST" else "?fault=unreachable"
    req = urllib.request.Request(
        url + "/sim/faults" + query, data=body, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10):
        pass


def lose_node(cluster: Cluster, node: str, *, stopped: Sequence[int] = (), unreachable: Sequence[str] = ()) -> LostNode:
    """Lose `node` as a server that lost power or its network: its kubelet stops reporting (`silence_node`)
    and its engines stop answering: each process of `stopped` gets SIGSTOP (per-pod `aissim attach`: its
    connections hang as across a dead link), each engine URL of `unreachable` the simulator's `unreachable`
    fault (`aissim attach --shared`, where a signal would stop every engine). The engines stop first, as
    they go with the node. `restore` gives the node back: the engines continue (those still there), KWOK
    manages the node again (annotation back, KWOK restarted), as a server that came back up."""
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    for url in unreachable:
        _unreachable(url, "POST")
    silent_at = silence_node(cluster, node)

    def resume() -> None:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):  # `aissim attach` stopped it with its pod
                os.kill(pid, signal.SIGCONT)
        for url in unreachable:
            with contextlib.suppress(OSError):  # its pod (and engine) may be gone by now
                _unreachable(url, "DELETE")

    def restore() -> None:
        resume()
        if cluster.state_dir is None:
            return
        cluster.kubectl("annotate", "node", node, f"{KWOK_NODE_ANNOTATION}=fake", "--overwrite")
        argv = kill_component(cluster.state_dir, "kwok")
        restart_component(cluster.state_dir, "kwok", argv)

    return LostNode(node=node, silent_at=silent_at, resume=resume, restore=restore)


#: How long a caller waits for one stage of hack/build-k8s.sh (its own cold build, or another invocation's it
#: waits on) before it gives up: cold, the core set took 25.6 min and LWS up to 29 min on this loaded machine.
TOOL_WAIT_SECONDS = float(os.environ.get("AIS_TOOL_WAIT_SECONDS", "3600"))


class ToolBuildError(RuntimeError):
    """A stage of hack/build-k8s.sh failed or did not finish within its wait; later asks fail at once."""


_built: dict[tuple[str, ...], Path] = {}
_failed: dict[tuple[str, ...], str] = {}


def build_tools(*stages: str, timeout: float | None = None) -> Path:
    """Build, wait for, or find cached the tools of `stages` (hack/build-k8s.sh's; default `core`: etcd,
    Kubernetes, KWOK, Helm, the GIE CRD); return their bin directory. The stage `vllm` alone is the real
    engine's install (hack/real-vllm.sh) and returns its Python.

    Another invocation building a tool (hack/test.sh's background `all`) holds that tool's lock; the
    script then waits for it, up to `timeout` seconds (TOOL_WAIT_SECONDS by default). A stage that failed
    or timed out once fails at once for the rest of the process, instead of every test waiting again.
    """
    key = stages or ("core",)
    if key in _built:
        return _built[key]
    if key in _failed:
        raise ToolBuildError(_failed[key])
    limit = TOOL_WAIT_SECONDS if timeout is None else timeout
    # Its own session, so a timeout stops the script and the go build under it (by this process's id).
    script = REAL_VLLM if key == ("vllm",) else BUILD_K8S
    proc = subprocess.Popen(["bash", str(script), *key], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        _failed[key] = (
            f"hack/{script.name} {' '.join(key)} did not finish within {limit:.0f}s (a cold build of the core set "
            "takes ~26 min and LWS up to 29 min on 2 cores; AIS_TOOL_WAIT_SECONDS sets the wait)"
        )
        raise ToolBuildError(_failed[key]) from None
    except BaseException:  # Ctrl-C, pytest's own timeout: the build must not outlive this process
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        raise
    if proc.returncode != 0:
        _failed[key] = f"hack/{script.name} {' '.join(key)} exited {proc.returncode} (its log is on stderr above)"
        raise ToolBuildError(_failed[key])
    _built[key] = Path(out.strip().splitlines()[-1])
    return _built[key]


def start_local(state_dir: Path, *, nodes: int = 1) -> Cluster:
    """Start the local control plane with its state in `state_dir` and `nodes` fake Atlas nodes."""
    env = {**os.environ, "AIS_CLUSTER_DIR": str(state_dir)}
    res = subprocess.run(
        [str(LOCAL_CLUSTER), "up", f"--nodes={nodes}"], env=env, stdout=subprocess.PIPE, text=True, check=True
    )
    last = res.stdout.strip().splitlines()[-1]
    prefix = "export KUBECONFIG="
    if not last.startswith(prefix):
        raise RuntimeError(f"hack/local-cluster up printed {last!r} last, not {prefix}<path>")
    bindir = Path(json.loads((state_dir / "cluster.json").read_text())["bindir"])
    return Cluster(kubeconfig=Path(last[len(prefix) :]), kubectl_bin=str(bindir / "kubectl"), state_dir=state_dir)


def stop_local(cluster: Cluster) -> list[int]:
    """Stop a cluster start_local started; return the PIDs that are still running (should be none)."""
    if cluster.state_dir is None:
        raise ValueError("not a cluster this process started")
    pids = cluster.pids()
    env = {**os.environ, "AIS_CLUSTER_DIR": str(cluster.state_dir)}
    subprocess.run([str(LOCAL_CLUSTER), "down"], env=env, check=True, stdout=subprocess.DEVNULL)
    return [pid for pid in pids.values() if pid_running(pid)]


def existing_cluster(kubeconfig: Path) -> Cluster:
    """A cluster someone else runs (kind in CI): kubectl from $AIS_KUBECTL or PATH."""
    kubectl_bin = os.environ.get("AIS_KUBECTL") or shutil.which("kubectl")
    if not kubectl_bin:
        raise RuntimeError("AIS_E2E_KUBECONFIG is set but no kubectl: set AIS_KUBECTL or put kubectl on PATH")
    return Cluster(kubeconfig=kubeconfig, kubectl_bin=kubectl_bin)


def established(cluster: Cluster, crd: str) -> None:
    """Wait for a CRD's Established condition by polling: `kubectl wait` fails outright while a just-created
    CRD has no conditions yet."""

    def done() -> bool:
        conditions = (cluster.get_json(f"crd/{crd}").get("status") or {}).get("conditions") or []
        return any(x["type"] == "Established" and x["status"] == "True" for x in conditions)

    wait_for(done, timeout=60, message=f"CRD {crd} Established")
