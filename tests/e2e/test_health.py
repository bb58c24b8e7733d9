"""Issue 5 end to end: canary readiness, config check, stall and drift rolls, against simulated engines.

Each test runs its own `aissim attach` for its namespace, so a test can start its engines with a
fault (slow start, dropped args) without touching other tests. Health windows are shortened through
`spec.health`, exactly as a user would tune them.

No healthy-long-prefill case here: at 30x a 512K prefill lasts ~5 s, shorter than any stall window, so it
could not fail. A long chunked prefill judged at real speed on the real engine is in tests/real
(test_real_engine.py, a 32K prefill outlasting two stall windows), and the detector's KV evidence on a 512K
prefill at its real timing is in tests/health (test_stall.py, test_machine.py: traces on an injected clock).
"""

from __future__ import annotations

import datetime
import json
import threading
from collections.abc import Callable

import pytest

from ascend_operator.api.constants import ANNOTATION_DRIFT_BASELINE
from harness.cluster import Cluster, wait_for
from tests.e2e.operator_fixtures import (
    FAST,
    AddNodes,
    Proc,
    ais,
    background_requests,
    condition,
    events,
    example,
    gate,
    label_nodes,
    live_pod,
    pods,
    post,
    ready,
    ready_service,
)

pytestmark = pytest.mark.usefixtures("delete_services_first")


#: The seed's long-context setting (~512K; docs/FACTS.md "Memory / KV budget"), so a 512K request is admitted.
LONG = {"maxModelLen": 524_288}
#: A 512K context: prompt plus the few generated tokens fill the admission limit exactly.
PROMPT_512K = 524_288 - 16


def replaced(cluster: Cluster, namespace: str, uid: str) -> None:
    """Wait until a pod other than `uid` serves the service."""
    wait_for(
        lambda: (p := live_pod(cluster, namespace, "svc")) is not None and p["metadata"]["uid"] != uid,
        timeout=90,
        message="a new pod",
    )


def test_ready_only_after_the_canary_passes(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Callable[..., Proc]
) -> None:
    label_nodes(cluster, add_nodes(1), namespace)
    attach(AIS_SIM_LOAD_SECONDS="450")  # 15 s of "loading 292 GB": port bound, no answer
    cluster.apply(example("svc", node_label=namespace, health=FAST), namespace=namespace)
    pod = wait_for(lambda: live_pod(cluster, namespace, "svc"), timeout=60, message="a running pod")
    wait_for(lambda: gate(live_pod(cluster, namespace, "svc") or pod) is not None, timeout=30, message="gate set")
    assert gate(live_pod(cluster, namespace, "svc") or pod) == "False/EngineNotAnswering"
    assert not ready(cluster, namespace, "svc")
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=90, message="Ready after the load")
    assert gate(live_pod(cluster, namespace, "svc") or pod) == "True/CanaryPassing"


def test_engine_ignoring_its_speculative_config_is_a_config_mismatch(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Callable[..., Proc]
) -> None:
    label_nodes(cluster, add_nodes(1), namespace)
    attach(AIS_SIM_DROP_ARGS="--speculative-config")  # the seed's truncated shell line
    cluster.apply(example("svc", node_label=namespace, health=FAST), namespace=namespace)
    wait_for(
        lambda: condition(ais(cluster, namespace, "svc"), "Degraded") == ("True", "ConfigMismatch"),
        timeout=90,
        message="ConfigMismatch",
    )
    degraded = next(c for c in ais(cluster, namespace, "svc")["status"]["conditions"] if c["type"] == "Degraded")
    assert "speculative: expected 7 draft tokens, engine reports off" in degraded["message"]
    assert events(cluster, namespace, "ConfigMismatch")
    pod = live_pod(cluster, namespace, "svc")
    assert pod is not None
    assert gate(pod) == "False/ConfigMismatch"
    assert not ready(cluster, namespace, "svc")


def _stall(cluster: Cluster, namespace: str) -> tuple[str, threading.Event]:
    pod = live_pod(cluster, namespace, "svc")
    assert pod is not None
    base = f"http://{pod['status']['podIP']}:8000"
    post(base, "/sim/faults", {"fault": "stall-at-kv", "threshold": 0.975})
    stop = threading.Event()
    body = {"model": "deepseek-v4-flash", "prompt": "long", "sim_prompt_tokens": PROMPT_512K, "max_tokens": 16}
    background_requests(base, body, clients=1, stop=stop)
    return pod["metadata"]["uid"], stop


def test_stall_is_rolled_exactly_once_and_the_service_recovers(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Callable[..., Proc]
) -> None:
    ready_service(cluster, namespace, add_nodes, attach, health=FAST, engine=LONG)
    first, stop = _stall(cluster, namespace)
    try:
        roll = wait_for(lambda: ais(cluster, namespace, "svc")["status"].get("lastRoll"), timeout=90, message="roll")
        assert roll["reason"] == "Stalled"
        assert "no forward progress" in roll["message"]
        stop.set()
        replaced(cluster, namespace, first)
        wait_for(lambda: ready(cluster, namespace, "svc"), timeout=90, message="Ready again")
        status = ais(cluster, namespace, "svc")["status"]
        assert len(status["rolls"]) == 1
        rolled = events(cluster, namespace, "Rolled")
        assert len(rolled) == 1
        assert "reason Stalled" in rolled[0]["message"]
    finally:
        stop.set()


def test_repeated_stalls_hit_the_rate_limit(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Callable[..., Proc]
) -> None:
    health = {**FAST, "rolls": {"maxPerHour": 1, "cooldownSeconds": 0}}
    ready_service(cluster, namespace, add_nodes, attach, health=health, engine=LONG)
    first, stop = _stall(cluster, namespace)
    wait_for(lambda: ais(cluster, namespace, "svc")["status"].get("lastRoll"), timeout=90, message="first roll")
    stop.set()
    replaced(cluster, namespace, first)
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=90, message="Ready again")
    _, stop2 = _stall(cluster, namespace)
    try:
        wait_for(
            lambda: condition(ais(cluster, namespace, "svc"), "Degraded") == ("True", "RollDeferred"),
            timeout=90,
            message="the refused roll reported",
        )
        status = ais(cluster, namespace, "svc")["status"]
        degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
        assert "Stalled on svc-0" in degraded["message"]
        assert "1 roll(s) in the last hour (max 1)" in degraded["message"]
        assert len(status["rolls"]) == 1
    finally:
        stop2.set()


def learned(cluster: Cluster, namespace: str, pod: str, *, batch: int, windows: int) -> bool:
    """The operator's drift baseline of `pod` (its annotation) holds `windows` step times at `batch` running."""
    body = cluster.get_json("pod", pod, "-n", namespace)
    raw: str | None = (body["metadata"].get("annotations") or {}).get(ANNOTATION_DRIFT_BASELINE)
    return raw is not None and len(json.loads(raw).get(str(batch), [])) >= windows


def test_drift_is_rolled_when_another_replica_serves(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Callable[..., Proc]
) -> None:
    drift = {"warmupSeconds": 0, "sampleWindowSeconds": 3, "baselineWindows": 2, "sustainSeconds": 12}
    health = {**FAST, "drift": drift}
    # the clients below talk to the pod directly and never stop, so its drain can only time out
    ready_service(cluster, namespace, add_nodes, attach, replicas=2, health=health, rollout={"drainSeconds": 5})
    target = next(p for p in pods(cluster, namespace, "svc") if p["metadata"]["name"] == "svc-0")
    base = f"http://{target['status']['podIP']}:8000"
    stop = threading.Event()
    body = {"model": "deepseek-v4-flash", "prompt": "steady", "sim_prompt_tokens": 256, "max_tokens": 100000,
            "ignore_eos": True}  # fmt: skip
    clients = 8
    background_requests(base, body, clients=clients, stop=stop)
    try:
        # the baseline: the operator learned `baselineWindows` busy windows at C8 (and wrote them to the pod)
        windows = drift["baselineWindows"]
        wait_for(
            lambda: learned(cluster, namespace, "svc-0", batch=clients, windows=windows),
            timeout=60,
            message=f"a drift baseline at batch {clients}",
        )
        post(base, "/sim/faults", {"fault": "drift", "fraction": 0.5, "period_s": 30})
        roll = wait_for(lambda: ais(cluster, namespace, "svc")["status"].get("lastRoll"), timeout=120, message="roll")
        assert roll["reason"] == "ThroughputDrift"
        assert roll["pod"] == "svc-0"
        assert roll["uid"] == target["metadata"]["uid"]
        assert roll["drain"] == "TimedOut"
        assert events(cluster, namespace, "Draining")
    finally:
        stop.set()


def test_two_simultaneous_stalls_are_both_rolled_one_cooldown_apart(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Callable[..., Proc]
) -> None:
    # Both replicas hang at once. Neither is Ready (our own gate takes each out), which must not hold the
    # other's roll; the cooldown still spaces the two rolls.
    cooldown = 15
    health = {**FAST, "rolls": {"maxPerHour": 3, "cooldownSeconds": cooldown}}
    ready_service(cluster, namespace, add_nodes, attach, replicas=2, health=health)
    first = {p["metadata"]["name"]: p for p in pods(cluster, namespace, "svc")}
    for pod in first.values():
        post(f"http://{pod['status']['podIP']}:8000", "/sim/faults", {"fault": "hang"})
    rolls = wait_for(
        lambda: len(r := ais(cluster, namespace, "svc")["status"].get("rolls") or []) >= 2 and r,
        timeout=90,
        message="both stalled replicas rolled",
    )
    assert sorted(r["pod"] for r in rolls) == ["svc-0", "svc-1"]
    assert {r["reason"] for r in rolls} == {"Stalled"}
    times = sorted(epoch(r["time"]) for r in rolls)
    assert times[1] - times[0] >= cooldown - 1  # RFC 3339 seconds
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=120, message="Ready again on two new pods")


def epoch(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
