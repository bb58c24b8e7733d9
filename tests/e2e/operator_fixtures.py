"""Fixtures and helpers that run the product against the session's cluster: the CRD, the operator, the
simulators, and the few reads and requests every e2e test makes (its service's pods, conditions, Ready).

The operator and `aissim attach` run as subprocesses exactly as a user starts them, bound to the
session's kubeconfig, and are stopped by PID at teardown. This module is a pytest plugin (the root
conftest.py registers it), so its fixtures need no import; import the helpers by name. Why one module:
the e2e files used to copy these pieces (an `attach` fixture in three files, "is it Ready" in four), and
copies drift; new e2e files should take them from here, and the names below are kept stable for them.

Fixtures: `crd`, `operator` (module), `simulators` (module, every namespace), `attach` (per test, its
namespace: `attach(**AIS_SIM_env)`), `delete_services_first`, `gie_crd`, `lws` (session: LeaderWorkerSet).
Helpers: `example`, `routed`, `label_nodes`, `ais`, `condition`, `wait_condition`, `ready`, `ready_service`,
`pods`, `live_pods`, `live_pod`, `bound_pods`, `gate`, `events`, `start_operator`, `start_attach`,
`http_status`, `post`, `background_requests`, `completion`; constants `FAST`, `SIM_TIME_SCALE`, `MODEL`, `AddNodes`.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from harness.cluster import ROOT, Cluster, build_tools, established, wait_for
from harness.product import AISCTL as AISCTL
from harness.product import AISSIM as AISSIM
from harness.product import EXAMPLE as EXAMPLE
from harness.product import FAST as FAST
from harness.product import Proc as Proc
from harness.product import example as example
from harness.product import label_nodes as label_nodes
from harness.product import start as start
from harness.product import start_operator as start_operator

CRD = ROOT / "crds" / "inference.ascend.dev_ascendinferenceservices.yaml"
#: The Gateway API Inference Extension's v1 InferencePool CRD, as hack/build-k8s.sh caches it.
POOL_CRD_FILE = "inference.networking.k8s.io_inferencepools.yaml"
#: An endpoint picker reference for routed services (nothing needs to serve it: the pool only names it).
PICKER = {"name": "dsv4-flash-epp", "port": {"number": 9002}}
#: Engine time per wall second for the simulators: a 512K prefill (148.76 s) takes ~5 s.
SIM_TIME_SCALE = "30"
#: The engines' grace when a test's `aissim attach` stops: its test is over and no client waits, so the
#: kubelet-like 15 s a hung or busy engine would get cost ~16 s a teardown (CI, 2026-12-05).
EXIT_GRACE = "2"
#: The `add_nodes` fixture (tests/e2e/fixtures.py): `add_nodes(n)` -> the new fake Atlas nodes' names.
AddNodes = Callable[[int], list[str]]
#: The example's served model name (examples/dsv4-flash.yaml), what requests to its engines name.
MODEL = "deepseek-v4-flash"


@pytest.fixture(scope="session")
def crd(cluster: Cluster) -> None:
    """The CRD from crds/, established."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    established(cluster, "ascendinferenceservices.inference.ascend.dev")


@pytest.fixture
def delete_services_first(cluster: Cluster, namespace: str, add_nodes: Callable[[int], list[str]]) -> Iterator[None]:
    """Delete the test's services while the operator runs and before the test's nodes go: the finalizer
    then goes at once, and the namespace deletion does not wait on the namespace controller's back-off.
    Use with `pytestmark = pytest.mark.usefixtures("delete_services_first")`."""
    yield
    cluster.kubectl("delete", "ais", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False)


LWS_CRD = "crd/leaderworkersets.leaderworkerset.x-k8s.io"


@pytest.fixture(scope="session")
def lws(cluster: Cluster) -> None:
    """LeaderWorkerSet on the session's cluster: started by hack/local-cluster on a local one (idempotent);
    on another cluster (kind) it must already be installed, else the test is skipped."""
    if cluster.state_dir is not None:
        env = {**os.environ, "AIS_CLUSTER_DIR": str(cluster.state_dir)}
        subprocess.run([str(ROOT / "hack" / "local-cluster"), "lws"], env=env, check=True, timeout=300)
    elif not cluster.kubectl("get", LWS_CRD, "--ignore-not-found", "-o", "name"):
        pytest.skip("LeaderWorkerSet is not installed on AIS_E2E_KUBECONFIG's cluster")


@pytest.fixture(scope="module")
def operator(cluster: Cluster, crd: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    """The operator, watching all namespaces, for the whole module."""
    proc = start_operator(cluster, tmp_path_factory.mktemp("operator") / "operator.log")
    yield proc
    proc.stop()
    assert proc.popen.returncode is not None


@pytest.fixture(scope="module")
def simulators(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    """`aissim attach`: a simulator per engine pod, on the pod's IP with the pod's args."""
    logs = tmp_path_factory.mktemp("sims")
    proc = start(
        ["attach", "--log-dir", str(logs), "--interval", "0.3", "--exit-grace", EXIT_GRACE],
        program=AISSIM,
        log=logs / "attach.log",
        env={"KUBECONFIG": str(cluster.kubeconfig), "AIS_SIM_TIME_SCALE": SIM_TIME_SCALE},
    )
    yield proc
    proc.stop()


def start_attach(cluster: Cluster, namespace: str, log_dir: Path, **env: str) -> Proc:
    """`aissim attach` for one namespace's engine pods, with extra AIS_SIM_* environment."""
    return start(
        [
            "attach",
            "--namespace",
            namespace,
            "--log-dir",
            str(log_dir),
            *("--interval", "0.3", "--exit-grace", EXIT_GRACE),
        ],
        program=AISSIM,
        log=log_dir / "attach.log",
        env={"KUBECONFIG": str(cluster.kubeconfig), "AIS_SIM_TIME_SCALE": SIM_TIME_SCALE, **env},
    )


@pytest.fixture
def attach(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """`attach(**env)` starts `aissim attach` for this test's namespace with extra AIS_SIM_* env, so a test
    can start its engines with a fault (slow start, dropped args) without touching other tests."""
    started: list[Proc] = []

    def run(**env: str) -> Proc:
        proc = start_attach(cluster, namespace, tmp_path, **env)
        started.append(proc)
        return proc

    yield run
    for proc in started:
        proc.stop()


def ais(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = cluster.get_json("ais", name, "-n", namespace)
    return result


def condition(body: dict[str, Any], kind: str) -> tuple[str, str] | None:
    for cond in (body.get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return cond["status"], cond["reason"]
    return None


def pods(cluster: Cluster, namespace: str, service: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.get_json(
        "pods", "-n", namespace, "-l", f"inference.ascend.dev/service={service}"
    )["items"]
    return items


def live_pods(cluster: Cluster, namespace: str, service: str) -> list[dict[str, Any]]:
    """The service's pods that are not terminating."""
    return [p for p in pods(cluster, namespace, service) if not p["metadata"].get("deletionTimestamp")]


def live_pod(cluster: Cluster, namespace: str, service: str) -> dict[str, Any] | None:
    """The service's first pod that is not terminating and has an IP (its engine can be reached)."""
    return next((p for p in live_pods(cluster, namespace, service) if p["status"].get("podIP")), None)


def bound_pods(cluster: Cluster, namespace: str, service: str) -> list[dict[str, Any]]:
    """The service's pods the scheduler bound to a node."""
    return [p for p in pods(cluster, namespace, service) if p["spec"].get("nodeName")]


def gate(pod: dict[str, Any]) -> str | None:
    """The operator's readiness gate on `pod` as "status/reason", None before it is set."""
    for cond in pod["status"].get("conditions") or []:
        if cond["type"] == "inference.ascend.dev/engine-ready":
            return f"{cond['status']}/{cond['reason']}"
    return None


def events(cluster: Cluster, namespace: str, reason: str) -> list[dict[str, Any]]:
    items = cluster.get_json("events", "-n", namespace)["items"]
    return [e for e in items if e.get("reason") == reason]


def wait_condition(
    cluster: Cluster, namespace: str, name: str, kind: str, want: tuple[str, str], timeout: float
) -> None:
    wait_for(
        lambda: condition(ais(cluster, namespace, name), kind) == want,
        timeout=timeout,
        message=f"{name} condition {kind}={want}",
    )


def ready(cluster: Cluster, namespace: str, name: str) -> bool:
    """The service reports Ready=True/AllReplicasReady."""
    return condition(ais(cluster, namespace, name), "Ready") == ("True", "AllReplicasReady")


def ready_service(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, attach: Callable[..., Proc], **spec: Any
) -> None:
    """A fake node per replica for the test, simulators attached, the example applied as "svc" with
    `spec`, then Ready."""
    label_nodes(cluster, add_nodes(int(spec.get("replicas", 1))), namespace)
    attach()
    cluster.apply(example("svc", node_label=namespace, **spec), namespace=namespace)
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=120, message="Ready")


def http_status(method: str, url: str, *, key: str | None = None, body: Any = None) -> int:
    """One request to an engine (with `Authorization: Bearer key` if given); its HTTP status."""

    async def go() -> int:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with aiohttp.ClientSession() as session, session.request(method, url, json=body, headers=headers) as r:
            await r.read()
            return r.status

    return asyncio.run(go())


def post(base: str, path: str, body: dict[str, Any]) -> None:
    """POST JSON to an engine (or a simulator's /sim/faults); raises on an error status."""

    async def go() -> None:
        async with aiohttp.ClientSession() as session, session.post(base + path, json=body) as resp:
            resp.raise_for_status()

    asyncio.run(go())


def completion(url: str, body: dict[str, Any], out: dict[str, Any]) -> threading.Thread:
    """One completion in a thread; `out` gets its status and body."""

    async def go() -> None:
        timeout = aiohttp.ClientTimeout(total=600)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(f"{url}/v1/completions", json=body) as resp,
        ):
            out["status"] = resp.status
            out["body"] = await resp.json()

    thread = threading.Thread(target=lambda: asyncio.run(go()), daemon=True)
    thread.start()
    return thread


def background_requests(base: str, body: dict[str, Any], *, clients: int, stop: threading.Event) -> threading.Thread:
    """Closed-loop clients until `stop` is set (or the engine goes away)."""

    async def go() -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:

            async def one() -> None:
                while not stop.is_set():
                    try:
                        async with session.post(base + "/v1/completions", json=body) as resp:
                            await resp.read()
                    except (aiohttp.ClientError, TimeoutError):
                        await asyncio.sleep(0.5)

            await asyncio.gather(*(one() for _ in range(clients)))

    thread = threading.Thread(target=lambda: asyncio.run(go()), daemon=True)
    thread.start()
    return thread


def gie_crd_path() -> Path:
    """$AIS_GIE_CRD (a cluster built elsewhere), else the copy hack/build-k8s.sh put in the tool cache."""
    given = os.environ.get("AIS_GIE_CRD")
    return Path(given) if given else build_tools("gie-crds") / "crds" / POOL_CRD_FILE


@pytest.fixture(scope="session")
def gie_crd(cluster: Cluster) -> dict[str, Any]:
    """The upstream InferencePool CRD, established in the session's cluster."""
    path = gie_crd_path()
    crd: dict[str, Any] = yaml.safe_load(path.read_text())
    assert crd["metadata"]["annotations"]["inference.networking.k8s.io/bundle-version"] == "v1.0.0"
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    established(cluster, crd["metadata"]["name"])
    return crd


def routed(name: str, node_label: str, **spec: Any) -> dict[str, Any]:
    """`example` with spec.routing.inferencePool enabled, naming PICKER as its endpoint picker."""
    body = example(name, node_label=node_label, **spec)
    body["spec"]["routing"] = {"inferencePool": {"enabled": True, "endpointPickerRef": PICKER}}
    return body
