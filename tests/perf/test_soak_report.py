"""The chaos soak's judgements (perf/soak_report.py, perf/soak_faults.py `update`) on hand-made records: what
counts as a lost request, a false roll, a detection and a recovery. The soak itself runs on demand
(`python -m perf.soak`); these are the rules its two must-be-zero figures rest on."""

from perf.soak_faults import Fault, update
from perf.soak_report import false_rolls, lost_outside, table, vanished_unrolled
from perf.soak_watch import Picture, PodSeen, Request, RollSeen


def pod(uid: str, *, service: str = "svc0", gate: str = "True", **kw: object) -> PodSeen:
    fields: dict[str, object] = {
        "service": service,
        "name": f"{service}-{uid}",
        "uid": uid,
        "node": f"n-{uid}",
        "ip": "127.0.1.1",
        "gate": gate,
        "ready": gate == "True",
        "deleting": False,
        "first_seen": 0.0,
        **kw,
    }
    return PodSeen(**fields)  # type: ignore[arg-type]


def picture(*pods: PodSeen, rolls: tuple[RollSeen, ...] = (), at: float = 100.0) -> Picture:
    pic = Picture(t0=0.0)
    pic.pods = {p.uid: p for p in pods}
    pic.rolls = {r.uid: r for r in rolls}
    pic.service_ready = {p.service: True for p in pods}
    pic.now = lambda: at  # type: ignore[method-assign]
    return pic


def test_a_request_the_faulted_engine_fails_is_the_faults_cost_any_other_is_lost() -> None:
    faults = [Fault(kind="hang", injected=50.0, service="svc0", uid="a")]
    requests = [
        Request("svc0", "a", 48.0, 60.0, ok=False, error="TimeoutError"),  # on the hung engine: its cost
        Request("svc0", "a", 10.0, 20.0, ok=False, error="HTTP 500"),  # before anything was injected: lost
        Request("svc0", "b", 55.0, 58.0, ok=False, error="ClientConnectorError"),  # the healthy replica: lost
        Request("svc0", "b", 55.0, 58.0, ok=True),
    ]
    assert [(r.uid, r.end) for r in lost_outside(requests, faults)] == [("a", 20.0), ("b", 58.0)]


def test_a_roll_of_a_pod_no_fault_touched_is_false_and_so_is_a_pod_gone_without_a_record() -> None:
    faults = [Fault(kind="npu-fault", injected=5.0, service="svc0", uid="a")]
    rolls = [RollSeen("svc0", "svc0-a", "a", "NPUFault", 9.0), RollSeen("svc1", "svc1-c", "c", "Stalled", 30.0)]
    assert [r.uid for r in false_rolls(rolls, faults)] == ["c"]
    gone = pod("d", service="svc1", gone_at=40.0)
    pic = picture(pod("a", gone_at=12.0), gone, pod("c", service="svc1", deleting=True), rolls=(rolls[1],))
    assert vanished_unrolled(pic, faults, end=100.0) == ["svc1/svc1-d"]
    # an operator kill touches no pod: a roll during it is false
    assert [r.uid for r in false_rolls(rolls, [Fault(kind="operator-kill", injected=1.0)])] == ["a", "c"]


def test_detection_is_the_first_sign_after_the_injection_and_recovery_needs_every_replica_serving() -> None:
    fault = Fault(kind="hang", injected=50.0, service="svc0", uid="a")
    # the gate fell once before the fault (start-up): not a detection
    update(fault, picture(pod("a", fell_at=10.0), pod("b"), at=60.0), replicas=2, detect_timeout=150)
    assert fault.detected is None
    assert not fault.missed
    rolled = RollSeen("svc0", "svc0-a", "a", "Stalled", 64.0)
    down = picture(pod("a", gate="False", fell_at=58.0, deleting=True, deleting_at=64.0), pod("b"), rolls=(rolled,))
    update(fault, down, replicas=2, detect_timeout=150)
    seen: tuple[object, ...] = (fault.detected, fault.rolled, fault.roll_reason, fault.recovered)
    assert seen == (58.0, 64.0, "Stalled", None)
    back = picture(pod("a", gone_at=66.0), pod("b"), pod("c"), rolls=(rolled,), at=90.0)
    update(fault, back, replicas=2, detect_timeout=150)
    assert fault.recovered == 90.0
    assert not fault.open


def test_a_fault_nobody_notices_is_missed_after_the_timeout() -> None:
    fault = Fault(kind="drift", injected=10.0, service="svc0", uid="a")
    update(fault, picture(pod("a"), pod("b"), at=159.0), replicas=2, detect_timeout=150)
    assert not fault.missed
    update(fault, picture(pod("a"), pod("b"), at=161.0), replicas=2, detect_timeout=150)
    assert fault.missed
    assert fault.detected is None
    assert fault.open
    update(fault, picture(pod("a"), pod("b"), at=165.0), replicas=2, detect_timeout=150)
    assert fault.closed == 165.0
    assert fault.recovered is None


def test_the_table_gives_counts_and_median_seconds_and_says_why_a_kind_was_not_drawn() -> None:
    faults = [
        Fault(kind="hang", injected=10.0, uid="a", detected=16.0, rolled=17.0, recovered=40.0),
        Fault(kind="hang", injected=100.0, uid="b", detected=108.0, rolled=109.0, recovered=150.0),
        Fault(kind="hang", injected=200.0, uid="c", detected=204.0, rolled=205.0, recovered=220.0),
        Fault(kind="operator-kill", injected=300.0, recovered=312.0),
    ]
    lines = table(faults, {"kv-transfer-hang": "needs a P/D pair"}).splitlines()
    assert "| hang | 3 | 3 | 3 | 3 | 0 | 6.0 (4.0-8.0) | 7.0 (5.0-9.0) | 30.0 (20.0-50.0) |" in lines
    assert "| operator-kill | 1 | n/a | 0 | 1 | 0 | n/a | - | 12.0 |" in lines
    assert "| kv-transfer-hang | not drawn: needs a P/D pair |  |  |  |  |  |  |  |" in lines


def test_a_crash_is_detected_when_the_operators_gate_fell_and_recovers_in_place_unrolled() -> None:
    """The kubelet restarts a crashed engine (Ready false meanwhile): that is not the operator seeing it. The
    crash is detected when the operator's gate fell, and recovered when the same pod serves again."""
    fault = Fault(kind="crash", injected=50.0, service="svc0", uid="a")
    kubelet_only = pod("a", gate="True", ready=False)  # the kubelet's Ready fell, the operator's gate did not
    update(fault, picture(kubelet_only, pod("b"), at=60.0), replicas=2, detect_timeout=150)
    assert fault.detected is None
    update(fault, picture(pod("a", gate="False", fell_at=62.0), pod("b"), at=63.0), replicas=2, detect_timeout=150)
    assert fault.detected == 62.0
    assert not fault.recovered
    update(fault, picture(pod("a", fell_at=62.0), pod("b"), at=80.0), replicas=2, detect_timeout=150)
    assert fault.recovered == 80.0
    assert fault.rolled is None


def test_a_pod_on_a_lost_node_keeps_ready_but_does_not_serve_once_the_operators_gate_fell() -> None:
    """No kubelet computes a lost node's pods' Ready: it stays True. The fault is not recovered until a
    successor serves: the old pod, its gate False, is not serving though Ready says so."""
    fault = Fault(kind="node-loss", injected=50.0, service="svc0", uid="a")
    silent = pod("a", gate="False", ready=True, fell_at=60.0)
    pic = picture(silent, pod("b"), at=61.0)
    assert [p.uid for p in pic.serving("svc0")] == ["b"]
    update(fault, pic, replicas=2, detect_timeout=150)
    assert fault.detected == 60.0
    assert not fault.recovered  # (not `is None`: mypy would take it as None for good)
    roll = RollSeen("svc0", "svc0-a", "a", "NodeLost", 90.0)
    update(fault, picture(pod("a", gate="False", fell_at=60.0, gone_at=91.0), pod("b"), pod("c"), rolls=(roll,),
                          at=120.0), replicas=2, detect_timeout=150)  # fmt: skip
    assert (fault.rolled, fault.roll_reason, fault.recovered) == (90.0, "NodeLost", 120.0)
