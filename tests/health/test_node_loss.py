"""The lost-node rules (health/node_loss.py), one row per way a node reports or goes silent.

Why a table: forcing a pod out (grace 0) is the one deletion that does not wait for the kubelet, so the
rows that must never give up matter as much as those that must: a pod slow to terminate on a live node, a
node whose Ready condition is stale while its Lease is fresh, an engine that answers from a silent node.
Node objects are built the way the API server holds them (clients/nodes.py `node_state` reads them), with
the taint keys and the Lease fields Kubernetes writes (k8s.io/api core/v1/well_known_taints.go:20-27,
kubelet's Lease of 40 s, node lifecycle controller's Ready Unknown).
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from ascend_operator.clients.nodes import node_state
from ascend_operator.health.node_loss import (
    TAINT_NOT_READY,
    TAINT_OUT_OF_SERVICE,
    TAINT_UNREACHABLE,
    NodeLossInput,
    NodeState,
    judge_node_loss,
    silent_since,
)

NOW = 1_800_000_000.0
WINDOW = 180.0


def stamp(epoch: float, *, micro: bool = False) -> str:
    when = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def node(
    *, ready: str = "True", ready_at: float = NOW - 3600, taints: tuple[tuple[str, str, float], ...] = ()
) -> dict[str, Any]:
    """A Node as the API server returns it (only the fields the rules read)."""
    return {
        "metadata": {"name": "atlas-a2-1"},
        "spec": {"taints": [{"key": k, "effect": e, "timeAdded": stamp(t)} for k, e, t in taints]},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "lastTransitionTime": stamp(NOW - 3600)},
                {"type": "Ready", "status": ready, "lastTransitionTime": stamp(ready_at)},
            ]
        },
    }


def lease(renewed: float, seconds: int = 40) -> dict[str, Any]:
    """The kubelet's Lease in kube-node-lease (renewTime is a MicroTime)."""
    return {
        "metadata": {"name": "atlas-a2-1", "namespace": "kube-node-lease"},
        "spec": {
            "holderIdentity": "atlas-a2-1",
            "leaseDurationSeconds": seconds,
            "renewTime": stamp(renewed, micro=True),
        },
    }


FRESH = lease(NOW - 5)
#: The kubelet stopped 300 s ago: its Lease expired at NOW - 260; the node lifecycle controller called the
#: node Unknown 50 s after the last renewal and tainted it unreachable.
STOPPED = lease(NOW - 300)
SILENT = node(
    ready="Unknown",
    ready_at=NOW - 250,
    taints=((TAINT_UNREACHABLE, "NoSchedule", NOW - 250), (TAINT_UNREACHABLE, "NoExecute", NOW - 250)),
)

CASES: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None, bool, str, bool]] = [
    # (case, node, lease, engine answers, reason, given up)
    ("live node, engine down: the health loop's business", node(), FRESH, False, "NodeReports", False),
    ("live node, a pod slow to terminate: never forced", node(), FRESH, False, "NodeReports", False),
    (
        "Ready stale (Unknown) but the Lease was just renewed: the kubelet is back",
        SILENT,
        FRESH,
        False,
        "NodeReports",
        False,
    ),
    (
        "Ready False from a kubelet that still renews (runtime down): live",
        node(ready="False", ready_at=NOW - 600),
        FRESH,
        False,
        "NodeReports",
        False,
    ),
    ("silent past the window, engine unreachable: lost", SILENT, STOPPED, False, "NodeLost", True),
    ("silent past the window but the engine answers: serving", SILENT, STOPPED, True, "EngineAnswers", False),
    (
        "Lease expired 60 s ago, Ready not yet updated: within the window",
        node(),
        lease(NOW - 100),
        False,
        "NodeSilent",
        False,
    ),
    (
        "Lease expired 200 s ago, Ready still True (controller-manager down): lost by the Lease",
        node(),
        lease(NOW - 240),
        False,
        "NodeLost",
        True,
    ),
    (
        "no Lease at all (a cluster without them), Ready Unknown 200 s",
        node(ready="Unknown", ready_at=NOW - 200),
        None,
        False,
        "NodeLost",
        True,
    ),
    (
        "no Lease, Ready Unknown 30 s: within the window",
        node(ready="Unknown", ready_at=NOW - 30),
        None,
        False,
        "NodeSilent",
        False,
    ),
    ("no Lease, Ready True: live", node(), None, False, "NodeReports", False),
    (
        "unreachable taint alone, 200 s",
        node(taints=((TAINT_UNREACHABLE, "NoExecute", NOW - 200),)),
        None,
        False,
        "NodeLost",
        True,
    ),
    (
        "not-ready taint alone counts through Ready, not the taint",
        node(taints=((TAINT_NOT_READY, "NoSchedule", NOW - 900),)),
        None,
        False,
        "NodeReports",
        False,
    ),
    (
        "out-of-service taint on a node that still renews: the administrator says it is down",
        node(taints=((TAINT_OUT_OF_SERVICE, "NoExecute", NOW - 200),)),
        FRESH,
        False,
        "NodeLost",
        True,
    ),
    ("node deleted: podgc's (40 s quarantine)", None, None, False, "NodeDeleted", False),
]


@pytest.mark.parametrize(
    ("case", "raw", "held", "answering", "reason", "failed"), CASES, ids=[c[0][:50] for c in CASES]
)
def test_the_chain(
    case: str, raw: dict[str, Any] | None, held: dict[str, Any] | None, answering: bool, reason: str, failed: bool
) -> None:
    state = None if raw is None else node_state(raw, held)
    verdict = judge_node_loss(
        NodeLossInput(pod="svc-0", node_name="atlas-a2-1", node=state, answering=answering, now=NOW, window=WINDOW)
    )
    assert verdict[0] == reason, (case, verdict)
    assert verdict[2] is failed, (case, verdict)


def test_an_unscheduled_pod_has_no_node_to_lose() -> None:
    verdict = judge_node_loss(
        NodeLossInput(pod="svc-0", node_name=None, node=None, answering=False, now=NOW, window=WINDOW)
    )
    assert verdict[:1] == ("NotScheduled",)
    assert not verdict[2]


def test_silence_starts_at_the_earliest_signal_and_names_each() -> None:
    state = node_state(SILENT, STOPPED)
    since, why = silent_since(state, now=NOW) or (0.0, "")
    assert since == pytest.approx(NOW - 260, abs=1)  # the Lease's expiry, before Ready went Unknown
    assert "Ready Unknown" in why
    assert TAINT_UNREACHABLE in why
    assert "Lease" in why


def test_the_window_is_counted_from_the_silence_not_from_the_pod() -> None:
    state = node_state(SILENT, STOPPED)  # silent since NOW - 260
    short = NodeLossInput(pod="p", node_name="atlas-a2-1", node=state, answering=False, now=NOW, window=259)
    long = NodeLossInput(pod="p", node_name="atlas-a2-1", node=state, answering=False, now=NOW, window=261)
    assert judge_node_loss(short)[2]
    assert not judge_node_loss(long)[2]
    assert "gives up at 261s" in judge_node_loss(long)[1]


def test_a_window_of_zero_gives_up_as_soon_as_the_silence_is_seen() -> None:
    state = NodeState(name="n", ready="Unknown", ready_since=NOW)
    assert judge_node_loss(NodeLossInput(pod="p", node_name="n", node=state, answering=False, now=NOW, window=0))[2]
