"""A node that goes silent costs its replica a few minutes, not forever (issue 38 item 1), the way a cluster
fails (harness/cluster.py `lose_node`, which the chaos soak draws too): KWOK stops playing the node's kubelet
(restarted with a selector that leaves the node out) and the node's engine stops answering (its simulator
process is stopped with SIGSTOP, so connections to it time out as across a dead link). Nothing in the API
says more than that: the Lease stops being renewed, the node lifecycle controller calls the node Unknown and
taints it unreachable.

What a user sees, asserted: the replica is back Ready on another node, its old pod gone from the API
(forced, grace 0, with a NodeLost roll in status.rolls), its successor's affinity keeping it off the lost
node; the other replica served a closed loop of requests throughout with 0 failures; and a pod on a live node
that is slow to terminate is not forced (its deletion waits for its kubelet, KWOK, as before).

A two-node LeaderWorkerSet group whose worker's node goes silent is recreated the same way: its leader's
ranks stop with the worker (aissim/group.py: a lost peer stops every rank), and whichever comes first, the
stall roll or NodeLost, the worker left on the silent node is forced out so the group's fixed names are free.

Cost: ~2.5 min on the session cluster (3 fake nodes per test; the Lease's 40 s duration is most of it, the
services use spec.health.nodeLostSeconds 15 and the fast health profile, simulators at 30x). The seconds from
the node going silent to the replacement Ready are printed (`-s` shows them).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from harness.cluster import Cluster, lose_node, wait_for
from harness.engines import attached_engine
from tests.e2e.operator_fixtures import (
    FAST,
    MODEL,
    AddNodes,
    Proc,
    ais,
    attach,  # noqa: F401 (a fixture)
    example,
    label_nodes,
    live_pods,
    ready,
    start_operator,
)
from tests.e2e.passes import free_port, more_passes
from tests.e2e.test_multinode import by_role, group_pods, two_node

#: spec.health.nodeLostSeconds here: not less than one Lease renewal period (10 s) plus slack, because a
#: restarted KWOK is a new Lease holder and takes over the Leases of the nodes it keeps playing only after
#: they lapse, up to a renewal period late (seen: 2.7 s), which a real kubelet restart (its holder is its
#: node) does not do; with 5 s, a group's new leader, loading on a live node, was forced out in that gap.
NODE_LOST_SECONDS = 15
BODY = {"model": MODEL, "prompt": "Say hello.", "max_tokens": 16}


@pytest.fixture
def node_loss_operator(cluster: Cluster, crd: None, namespace: str, tmp_path: Path) -> Iterator[int]:
    """The operator with the node and Lease watches on (`--node-loss`); its metrics port (to count its
    passes). The test's services are deleted while it still runs (their finalizer goes at once)."""
    if cluster.state_dir is None:
        pytest.skip("silencing a node restarts KWOK: only on the local control plane this session started")
    metrics = free_port()
    proc = start_operator(
        cluster, tmp_path / "operator.log", "--node-loss", "--metrics-port", str(metrics), port_base=19780
    )
    yield metrics
    cluster.kubectl("delete", "ais", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False)
    proc.stop()


def engine_pid(attach_proc: Proc, ip: str) -> int:
    """The simulator `aissim attach` started for the pod at `ip`."""
    return attached_engine(attach_proc.popen.pid, ip)


class Load:
    """Closed-loop clients against one engine, counting answers and failures (a refused connection, a
    timeout, an error status each count)."""

    def __init__(self, base: str, *, clients: int = 2) -> None:
        self.base, self.clients = base, clients
        self.ok = self.failed = 0
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._go()), daemon=True)

    async def _go(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:

            async def one() -> None:
                while not self.stop.is_set():
                    try:
                        async with session.post(self.base + "/v1/completions", json=BODY) as resp:
                            await resp.read()
                            if resp.status == 200:
                                self.ok += 1
                                continue
                            self.errors.append(f"HTTP {resp.status}")
                    except (aiohttp.ClientError, TimeoutError) as exc:
                        self.errors.append(repr(exc))
                    self.failed += 1
                    await asyncio.sleep(0.2)

            await asyncio.gather(*(one() for _ in range(self.clients)))

    def __enter__(self) -> Load:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=90)


def resume(pid: int) -> None:
    """SIGCONT the stopped simulator, unless `aissim attach` already stopped it with its pod (SIGKILL)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def node_of(pod: dict[str, Any]) -> str:
    return str(pod["spec"].get("nodeName") or "")


def engine_url(pod: dict[str, Any]) -> str:
    port = pod["spec"]["containers"][0]["ports"][0]["containerPort"]
    return f"http://{pod['status']['podIP']}:{port}"


def kept_off(pod: dict[str, Any], node: str) -> bool:
    """The pod's required node affinity excludes `node` by name (the fence, render/fitness.py)."""
    terms = (
        ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    )
    fence = {"key": "metadata.name", "operator": "NotIn", "values": [node]}
    return bool(terms) and all(fence in (t.get("matchFields") or []) for t in terms)


def test_a_replica_on_a_silent_node_comes_back_on_another_node_while_the_other_serves(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    attach: Callable[..., Proc],
    node_loss_operator: int,
) -> None:
    nodes = add_nodes(3)  # two replicas, one node each, and a spare for the successor
    label_nodes(cluster, nodes, namespace)
    sims = attach()
    health = {**FAST, "nodeLostSeconds": NODE_LOST_SECONDS}
    cluster.apply(example("svc", node_label=namespace, replicas=2, health=health), namespace=namespace)
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=150, message="both replicas Ready")
    before = {p["metadata"]["name"]: p for p in live_pods(cluster, namespace, "svc")}
    assert len({node_of(p) for p in before.values()}) == 2, "the two replicas share a node"
    victim, survivor = sorted(before.values(), key=lambda p: p["metadata"]["name"])
    lost = node_of(victim)
    stopped = engine_pid(sims, victim["status"]["podIP"])
    with Load(engine_url(survivor)) as load:
        wait_for(lambda: load.ok >= 5, timeout=30, message="the load answered by the surviving replica")
        gone = lose_node(cluster, lost, stopped=[stopped])  # the engine goes with its node: its connections hang
        t_silent = gone.silent_at
        try:

            def replaced() -> dict[str, Any] | None:
                pods = live_pods(cluster, namespace, "svc")
                new = [p for p in pods if p["metadata"]["uid"] not in {v["metadata"]["uid"] for v in before.values()}]
                return new[0] if new and node_of(new[0]) else None

            def old_gone() -> bool:
                names = {p["metadata"]["uid"] for p in cluster.get_json("pods", "-n", namespace)["items"]}
                return victim["metadata"]["uid"] not in names

            wait_for(old_gone, timeout=150, interval=0.5, message=f"pod {victim['metadata']['name']} forced out")
            t_forced = time.time()
            successor = wait_for(replaced, timeout=60, interval=0.5, message="a successor bound to a node")
            wait_for(lambda: ready(cluster, namespace, "svc"), timeout=120, interval=0.5, message="Ready again")
            t_ready = time.time()
        finally:
            gone.resume()
    print(
        f"node {lost} silent -> old pod forced out {t_forced - t_silent:.1f}s -> replacement Ready "
        f"{t_ready - t_silent:.1f}s; the other replica: {load.ok} answered, {load.failed} failed"
    )
    assert load.failed == 0, load.errors[:5]
    assert load.ok > 0
    assert node_of(successor) != lost
    assert kept_off(successor, lost), successor["spec"].get("affinity")
    rolls = (ais(cluster, namespace, "svc").get("status") or {}).get("rolls") or []
    given_up = [r for r in rolls if r["uid"] == victim["metadata"]["uid"]]
    assert [r["reason"] for r in given_up] == ["NodeLost"], rolls
    assert lost in given_up[0]["message"]
    # the surviving replica was never touched
    assert survivor["metadata"]["uid"] in {p["metadata"]["uid"] for p in live_pods(cluster, namespace, "svc")}


def test_a_pod_slow_to_terminate_on_a_live_node_is_not_forced(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    attach: Callable[..., Proc],
    node_loss_operator: int,
) -> None:
    """A live node's kubelet finishes its pods; the operator never shortcuts it. A finalizer holds the pod
    Terminating (as a slow preStop or a stuck volume unmount would) past nodeLostSeconds, its engine stopped
    answering: it stays until the finalizer goes."""
    label_nodes(cluster, add_nodes(1), namespace)
    sims = attach()
    health = {**FAST, "nodeLostSeconds": 0}
    cluster.apply(example("svc", node_label=namespace, replicas=1, health=health), namespace=namespace)
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=150, message="Ready")
    pod = live_pods(cluster, namespace, "svc")[0]
    name = pod["metadata"]["name"]
    cluster.kubectl("patch", "pod", name, "-n", namespace, "--type=merge", "-p",
                    '{"metadata":{"finalizers":["e2e.ascend.dev/hold"]}}')  # fmt: skip
    stopped = engine_pid(sims, pod["status"]["podIP"])
    os.kill(stopped, signal.SIGSTOP)
    try:
        cluster.kubectl("delete", "pod", name, "-n", namespace, "--wait=false")
        # several health passes with the pod Terminating and its engine silent: nodeLostSeconds 0 would give
        # it up at once on a silent node
        more_passes(node_loss_operator, health=8, reconcile=1)
        current = cluster.get_json("pod", name, "-n", namespace)
        assert current["metadata"]["uid"] == pod["metadata"]["uid"]
        assert current["metadata"].get("deletionTimestamp")
        rolls = (ais(cluster, namespace, "svc").get("status") or {}).get("rolls") or []
        assert not [r for r in rolls if r["reason"] == "NodeLost"], rolls
    finally:
        resume(stopped)
        cluster.kubectl("patch", "pod", name, "-n", namespace, "--type=merge", "-p",
                        '{"metadata":{"finalizers":null}}', check=False)  # fmt: skip


def test_a_group_with_its_worker_on_a_silent_node_is_recreated_on_live_nodes(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    lws: None,
    attach: Callable[..., Proc],
    node_loss_operator: int,
) -> None:
    label_nodes(cluster, add_nodes(3), namespace)  # the leader's, the worker's, and a spare for the worker
    sims = attach()
    body = two_node("svc", namespace)
    body["spec"]["health"] = {**FAST, "nodeLostSeconds": NODE_LOST_SECONDS}
    cluster.apply(body, namespace=namespace)
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=180, message="the group Ready")
    roles = by_role(group_pods(cluster, namespace))
    leader, worker = roles["leader"], roles["worker"]
    lost = node_of(worker)
    old = {leader["metadata"]["uid"], worker["metadata"]["uid"]}
    gone = lose_node(cluster, lost, stopped=[engine_pid(sims, worker["status"]["podIP"])])
    t_silent = gone.silent_at
    try:

        def recreated() -> bool:
            pods = group_pods(cluster, namespace)
            uids = {p["metadata"]["uid"] for p in pods}
            return len(pods) == 2 and not old & uids and all(node_of(p) and node_of(p) != lost for p in pods)

        wait_for(recreated, timeout=180, interval=0.5, message="the group recreated off the silent node")
        t_placed = time.time()
        wait_for(lambda: ready(cluster, namespace, "svc"), timeout=180, interval=0.5, message="Ready again")
        t_ready = time.time()
    finally:
        gone.resume()
    rolls = (ais(cluster, namespace, "svc").get("status") or {}).get("rolls") or []
    print(
        f"group: node {lost} silent -> recreated off it {t_placed - t_silent:.1f}s -> Ready "
        f"{t_ready - t_silent:.1f}s; rolls {[(r['pod'], r['reason']) for r in rolls]}"
    )
    forced = [r for r in rolls if r["reason"] == "NodeLost"]
    assert forced, rolls
    assert all(lost in r["message"] for r in forced)
    assert {r["uid"] for r in forced} <= old
    pods = cluster.get_json("pods", "-n", namespace)["items"]
    assert not [p for p in pods if p["metadata"]["uid"] in old], "a pod of the old group is left"
