"""Issue 13 end to end: every deletion through one budget, drains before planned deletions, roll records
that survive a crash between the record and the delete, refused creates in the status.

Each test starts its own operator (function scope): the crash test arms the fault point
AIS_FAULT_AFTER_ROLL_RECORD=1 in its first operator, which must be the only one acting on the service.
Engines are simulators (`aissim attach`) at 30x engine speed; faults go through their /sim/faults API.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cluster import Cluster, WaitTimeout, wait_for
from tests.e2e.operator_fixtures import (
    FAST,
    MODEL,
    AddNodes,
    Proc,
    ais,
    attach,  # noqa: F401 (a fixture)
    background_requests,
    completion,
    condition,
    events,
    example,
    gate,
    label_nodes,
    pods,
    post,
    start,
    start_operator,
)
from tests.e2e.passes import free_port, more_passes


def delete_services(cluster: Cluster, namespace: str) -> None:
    """While an operator still runs: its finalizer goes at once, and the namespace deletion does not wait."""
    cluster.kubectl("delete", "ais", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False)


@pytest.fixture
def op_metrics() -> int:
    """The port of the test operator's Prometheus metrics (its pass counts: tests/e2e/passes.py)."""
    return free_port()


@pytest.fixture
def op(cluster: Cluster, namespace: str, crd: None, tmp_path: Path, op_metrics: int) -> Iterator[Proc]:
    """This test's operator (no other operator acts on the cluster meanwhile); the test's services are
    deleted before it stops."""
    proc = start_operator(cluster, tmp_path / "operator.log", "--metrics-port", str(op_metrics))
    yield proc
    delete_services(cluster, namespace)
    proc.stop()


def live(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    return [p for p in pods(cluster, namespace, "svc") if not p["metadata"].get("deletionTimestamp")]


def ready_pods(cluster: Cluster, namespace: str) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in live(cluster, namespace)
        if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
    )


def all_ready(cluster: Cluster, namespace: str) -> bool:
    return condition(ais(cluster, namespace, "svc"), "Ready") == ("True", "AllReplicasReady")


def serve(cluster: Cluster, namespace: str, add_nodes: AddNodes, attach: Callable[..., Proc], **spec: Any) -> None:
    label_nodes(cluster, add_nodes(int(spec.get("replicas", 1))), namespace)
    attach()
    cluster.apply(example("svc", node_label=namespace, **spec), namespace=namespace)
    wait_for(lambda: all_ready(cluster, namespace), timeout=150, message="Ready")


def base(pod: dict[str, Any]) -> str:
    return f"http://{pod['status']['podIP']}:8000"


def by_name(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return next(p for p in live(cluster, namespace) if p["metadata"]["name"] == name)


def what_was_seen(cluster: Cluster, namespace: str, log: Path) -> str:
    """The service's conditions, its pods' conditions and the operator log's last lines (not its DEBUG)."""
    status = ais(cluster, namespace, "svc").get("status") or {}
    conditions = [(c["type"], c["status"], c["reason"], c["message"][:200]) for c in status.get("conditions") or []]
    pod_conditions = {
        p["metadata"]["name"]: [(c["type"], c["status"], c.get("reason")) for c in p["status"].get("conditions") or []]
        for p in pods(cluster, namespace, "svc")
    }
    lines = [line for line in log.read_text(errors="replace").splitlines() if " DEBUG " not in line][-40:]
    return f"service conditions: {conditions}\npods: {pod_conditions}\noperator log:\n" + "\n".join(lines)


def test_a_crash_between_the_roll_record_and_the_delete_loses_nothing_and_deletes_no_successor(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, crd: None, attach: Callable[..., Proc], tmp_path: Path
) -> None:
    health = {**FAST, "rolls": {"maxPerHour": 1, "cooldownSeconds": 0}}
    label_nodes(cluster, add_nodes(1), namespace)
    attach()
    doomed = start(
        ["operator", "--liveness", "http://127.0.0.1:18999/healthz", "--resync-seconds", "5", "--log-level", "DEBUG"],
        log=tmp_path / "doomed.log",
        env={"KUBECONFIG": str(cluster.kubeconfig), "AIS_FAULT_AFTER_ROLL_RECORD": "1"},
    )
    try:
        cluster.apply(example("svc", node_label=namespace, health=health), namespace=namespace)
        try:
            wait_for(lambda: all_ready(cluster, namespace), timeout=150, message="Ready")
        except WaitTimeout as exc:  # once in ~6 runs (2026-12-01), not reproduced alone: say what was seen
            raise AssertionError(f"{exc}\n{what_was_seen(cluster, namespace, tmp_path / 'doomed.log')}") from exc
        first = live(cluster, namespace)[0]
        post(base(first), "/sim/faults", {"fault": "hang"})
        wait_for(lambda: doomed.popen.poll() is not None, timeout=90, message="the operator killed at the fault point")
        assert doomed.popen.returncode == -signal.SIGKILL
    finally:
        doomed.stop(signal.SIGKILL)
    rolls = ais(cluster, namespace, "svc")["status"]["rolls"]
    assert [(r["pod"], r["uid"], r["reason"]) for r in rolls] == [("svc-0", first["metadata"]["uid"], "Stalled")]
    assert [p["metadata"]["uid"] for p in live(cluster, namespace)] == [first["metadata"]["uid"]]  # not deleted

    second_metrics = free_port()
    second = start_operator(cluster, tmp_path / "second.log", "--metrics-port", str(second_metrics))
    try:
        wait_for(
            lambda: (now := live(cluster, namespace)) and now[0]["metadata"]["uid"] != first["metadata"]["uid"],
            timeout=90,
            message="the recorded roll completed",
        )
        wait_for(lambda: all_ready(cluster, namespace), timeout=120, message="Ready on the successor")
        successor = live(cluster, namespace)[0]
        more_passes(second_metrics, health=6, reconcile=2)  # both loops looked again: the record spares the successor
        assert [p["metadata"]["uid"] for p in live(cluster, namespace)] == [successor["metadata"]["uid"]]
        status = ais(cluster, namespace, "svc")["status"]
        assert len(status["rolls"]) == 1
        assert len(events(cluster, namespace, "RollCompleted")) == 1
        # the hourly count includes the crashed roll: a second stall is refused by maxPerHour 1
        post(base(successor), "/sim/faults", {"fault": "hang"})
        wait_for(
            lambda: condition(ais(cluster, namespace, "svc"), "Degraded") == ("True", "RollDeferred"),
            timeout=90,
            message="the second roll refused by the rate limit",
        )
        degraded = next(c for c in ais(cluster, namespace, "svc")["status"]["conditions"] if c["type"] == "Degraded")
        assert "1 roll(s) in the last hour (max 1)" in degraded["message"]
        assert [p["metadata"]["uid"] for p in live(cluster, namespace)] == [successor["metadata"]["uid"]]
    finally:
        delete_services(cluster, namespace)
        second.stop()


def test_a_spec_change_while_one_replica_is_stalled_takes_one_pod_out_at_a_time(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, op: Proc, attach: Callable[..., Proc]
) -> None:
    serve(cluster, namespace, add_nodes, attach, replicas=3, health=FAST, rollout={"drainSeconds": 60})
    stalled = by_name(cluster, namespace, "svc-2")
    post(base(stalled), "/sim/faults", {"fault": "hang"})
    wait_for(lambda: ready_pods(cluster, namespace) == ["svc-0", "svc-1"], timeout=60, message="svc-2 out")
    cluster.kubectl(
        "patch",
        "ais",
        "svc",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"engine": {"maxNumSeqs": 16}}}),
    )
    fewest, deadline = 3, time.monotonic() + 300
    while time.monotonic() < deadline:
        fewest = min(fewest, len(ready_pods(cluster, namespace)))
        status = ais(cluster, namespace, "svc")["status"]
        if status.get("updatedReplicas") == 3 and all_ready(cluster, namespace):
            break
        time.sleep(0.3)
    else:
        pytest.fail(f"the spec change did not finish: {ais(cluster, namespace, 'svc')['status']}")
    assert fewest >= 2, "two Ready pods were out at once"
    rolls = ais(cluster, namespace, "svc")["status"]["rolls"]
    by_pod = {name: [(r["reason"], r["drain"]) for r in rolls if r["pod"] == name] for name in ("svc-0", "svc-1")}
    assert by_pod == {"svc-0": [("SpecChanged", "Completed")], "svc-1": [("SpecChanged", "Completed")]}
    # the stalled pod went without a drain (nothing to wait for); its successor may have been created just
    # before the spec change landed and then been replaced once more
    stalled_rolls = [r for r in rolls if r["pod"] == "svc-2"]
    assert stalled_rolls[0]["uid"] == stalled["metadata"]["uid"]
    assert stalled_rolls[0]["drain"] == "NotDrained"


def pod_ready(pod: dict[str, Any]) -> bool:
    """The pod's Ready condition: what the EndpointSlice controller and an InferencePool's endpoint picker
    route by. (On the local control plane pod IPs are 127.x, which EndpointSlice validation refuses, so the
    slices stay empty there; the pod condition is the observable routing input.)"""
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


def test_a_drift_roll_drains_the_pod_and_its_long_request_completes(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, op: Proc, op_metrics: int, attach: Callable[..., Proc]
) -> None:
    health = {
        **FAST,
        "drift": {"warmupSeconds": 0, "sampleWindowSeconds": 3, "baselineWindows": 2, "sustainSeconds": 12},
    }
    serve(cluster, namespace, add_nodes, attach, replicas=2, health=health, rollout={"drainSeconds": 300})
    target = by_name(cluster, namespace, "svc-0")
    url = base(target)
    stop = threading.Event()
    short = {"model": MODEL, "prompt": "steady", "sim_prompt_tokens": 256, "max_tokens": 20000, "ignore_eos": True}
    # The long request starts before the baseline: the drift detector learns step time per batch size and
    # does not judge a batch size it never learned (health/drift.py), so the batch the baseline sees (8 short
    # clients + the long one) must be the batch the drift happens at, and the clients' requests are long enough
    # (20000 tokens) that windows stay decode-dominated rather than mixing in a new prefill every few seconds.
    long_result: dict[str, Any] = {}
    long_body = {"model": MODEL, "prompt": "long", "sim_prompt_tokens": 256, "max_tokens": 60000, "ignore_eos": True}
    long_thread = completion(url, long_body, long_result)
    background_requests(url, short, clients=8, stop=stop)
    more_passes(op_metrics, health=15, reconcile=0)  # the baseline: 15 scrapes of busy windows at C9
    post(url, "/sim/faults", {"fault": "drift", "fraction": 0.5, "period_s": 30})
    try:
        wait_for(
            lambda: gate(by_name(cluster, namespace, "svc-0")) == "False/Draining", timeout=120, message="draining"
        )
    finally:
        stop.set()  # the Service no longer sends it requests; these clients talk to the pod directly
    drained_at = time.monotonic()
    wait_for(lambda: not pod_ready(by_name(cluster, namespace, "svc-0")), timeout=30, message="svc-0 not Ready")
    wait_for(
        lambda: condition(ais(cluster, namespace, "svc"), "Ready") == ("False", "Draining"),
        timeout=30,
        message="the service says a replica drains",
    )
    assert long_thread.is_alive(), "the long request should still be running when the drain starts"
    long_thread.join(timeout=300)
    assert long_result["status"] == 200
    assert long_result["body"]["usage"]["completion_tokens"] == 60000
    roll = wait_for(lambda: ais(cluster, namespace, "svc")["status"].get("lastRoll"), timeout=60, message="roll")
    assert (roll["pod"], roll["uid"], roll["reason"], roll["drain"]) == (
        "svc-0", target["metadata"]["uid"], "ThroughputDrift", "Completed",
    )  # fmt: skip
    print(f"drain took {time.monotonic() - drained_at:.1f}s after the gate went False: {roll['message']}")
    wait_for(lambda: all_ready(cluster, namespace), timeout=120, message="Ready again")


def test_kubectl_scale_down_removes_the_replica_with_fewer_running_requests(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, op: Proc, op_metrics: int, attach: Callable[..., Proc]
) -> None:
    serve(cluster, namespace, add_nodes, attach, replicas=2, health=FAST, rollout={"drainSeconds": 60})
    busy = by_name(cluster, namespace, "svc-1")  # the highest index: the old rule would have removed it
    stop = threading.Event()
    body = {"model": MODEL, "prompt": "steady", "sim_prompt_tokens": 256, "max_tokens": 3000, "ignore_eos": True}
    background_requests(base(busy), body, clients=4, stop=stop)
    try:
        more_passes(op_metrics, health=3, reconcile=0)  # a few scrapes see it busy
        cluster.kubectl("scale", "ais/svc", "-n", namespace, "--replicas=1")
        wait_for(
            lambda: [p["metadata"]["name"] for p in live(cluster, namespace)] == ["svc-1"],
            timeout=90,
            message="svc-0 removed",
        )
    finally:
        stop.set()
    roll = ais(cluster, namespace, "svc")["status"]["lastRoll"]
    assert (roll["pod"], roll["reason"], roll["drain"]) == ("svc-0", "ScaleDown", "Completed")
    assert live(cluster, namespace)[0]["metadata"]["uid"] == busy["metadata"]["uid"]
    wait_for(lambda: all_ready(cluster, namespace), timeout=60, message="Ready at one replica")


def test_a_pod_refused_by_a_resource_quota_shows_in_the_status(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, op: Proc, op_metrics: int
) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-npus"},
        "spec": {"hard": {"requests.huawei.com/Ascend910": "0"}},
    }
    cluster.apply(quota, namespace=namespace)
    # until the quota controller has counted usage, admission refuses with another message ("status unknown")
    wait_for(
        lambda: cluster.get_json("resourcequota", "no-npus", "-n", namespace).get("status", {}).get("used") is not None,
        timeout=60,
        message="quota usage counted",
    )
    label_nodes(cluster, add_nodes(1), namespace)
    cluster.apply(example("svc", node_label=namespace), namespace=namespace)
    wait_for(
        lambda: condition(ais(cluster, namespace, "svc"), "Ready") == ("False", "PodCreateFailed"),
        timeout=60,
        message="PodCreateFailed",
    )
    ready = next(c for c in ais(cluster, namespace, "svc")["status"]["conditions"] if c["type"] == "Ready")
    assert "exceeded quota: no-npus" in ready["message"]
    assert condition(ais(cluster, namespace, "svc"), "Degraded") == ("True", "PodCreateFailed")
    more_passes(op_metrics, health=0, reconcile=3)  # more passes retry the create: still one event per message
    posted = [e["message"] for e in events(cluster, namespace, "PodCreateFailed")]
    # one for the refusal (per distinct message) and one for Degraded turning True with that reason
    assert sum(m.startswith("creating pod svc-0: ") for m in posted) == 1, posted
    assert len(posted) == len(set(posted)) == 2, posted
    assert pods(cluster, namespace, "svc") == []
