"""The health pass with lost nodes, against the in-memory API server: what a user sees is the replica's pod
gone at once (grace 0) with a NodeLost record written before the delete, a group's worker on the lost node
forced out with its leader, and nothing forced on a live node, however long its pod takes to terminate.

Why here and not only in the rules' table (tests/health/test_node_loss.py): the table cannot see that a pod
already Terminating reaches the decision (the health loop judged only running pods before), that the delete
carries grace 0, nor that the record comes first.
"""

from typing import Any

import pytest
import yaml

from ascend_operator.api.constants import API_VERSION, KIND
from ascend_operator.api.parse import ParsedService, parse_resource
from ascend_operator.controller.engine_io import Monitor, MonitorState
from ascend_operator.controller.monitor import health_pass
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.health.node_loss import TAINT_UNREACHABLE, NodeState, Taint
from tests.fixtures.examples import EXAMPLE
from tests.fixtures.kube import FakeKube
from tests.health.test_monitor import FakeEngines

NOW = 1_800_000_000.0
LIVE = NodeState(name="atlas-a2-0", ready="True", ready_since=NOW - 3600, lease_renewed=NOW - 3, lease_seconds=40)
#: The kubelet stopped 300 s ago: its Lease expired 260 s ago, the node controller called it Unknown.
LOST = NodeState(
    name="atlas-a2-1",
    ready="Unknown",
    ready_since=NOW - 250,
    taints=(Taint(key=TAINT_UNREACHABLE, effect="NoExecute", added=NOW - 250),),
    lease_renewed=NOW - 300,
    lease_seconds=40,
)
NODES = {n.name: n for n in (LIVE, LOST)}


class Partitioned(FakeEngines):
    """Engines on the lost node do not answer (their connection times out)."""

    def __init__(self, silent: set[str]) -> None:
        super().__init__()
        self.silent = silent

    async def get_text(self, url: str, *, timeout: float) -> str | None:
        if any(f"//{ip}:" in url for ip in self.silent):
            return None
        return await super().get_text(url, timeout=timeout)


def pod(name: str, uid: str, ip: str, node: str, *, terminating: bool = False, service: str = "svc") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": uid, "labels": {"inference.ascend.dev/service": service}}
    if terminating:  # deleted earlier (a roll, or the taint manager's eviction): nothing will finish it there
        meta["deletionTimestamp"] = "2027-01-15T07:59:00Z"
    return {
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "podIP": ip, "startTime": "2027-01-15T06:00:00Z"},
    }


def cluster(*pods: dict[str, Any]) -> FakeKube:
    kube = FakeKube()
    kube.add(*pods, {"kind": KIND, "apiVersion": API_VERSION, "metadata": {"name": "svc"}, "status": {}})
    return kube


async def one_pass(kube: FakeKube, spec: Any, silent: set[str], memory: ServiceMemory | None = None) -> ServiceMemory:
    memory = memory or ServiceMemory()
    state = MonitorState()
    mon = Monitor(
        kube=kube, engines=Partitioned(silent), events=lambda t, r, m: None, wall=lambda: NOW, nodes=NODES.get
    )
    try:
        await health_pass(mon, spec=spec, namespace="ns", service="svc", state=state, memory=memory)
    finally:
        await state.close()
    return memory


def writes(kube: FakeKube) -> list[tuple[str, str, int | None]]:
    """The service's status writes (the roll record) and the deletes, in order (not the pods' gate writes)."""
    calls = [c for c in kube.requests("status", "delete") if c.kind == KIND or c.verb == "delete"]
    return [(c.verb, c.name, c.grace_seconds) for c in calls]


@pytest.fixture
def spec() -> Any:
    example: ParsedService = parse_resource(yaml.safe_load(EXAMPLE.read_text()))
    return example.spec.model_copy(update={"replicas": 2})


@pytest.mark.parametrize("terminating", [False, True], ids=["running", "already-terminating"])
async def test_a_pod_on_a_lost_node_is_recorded_then_forced_out(spec: Any, terminating: bool) -> None:
    kube = cluster(
        pod("svc-0", "u0", "127.1.1.5", "atlas-a2-1", terminating=terminating),
        pod("svc-1", "u1", "127.1.0.5", "atlas-a2-0"),
    )
    await one_pass(kube, spec, silent={"127.1.1.5"})
    assert writes(kube) == [("status", "svc", None), ("delete", "svc-0", 0)]  # the record first, then grace 0
    roll = kube.obj(KIND, "svc")["status"]["rolls"][-1]  # type: ignore[index]
    assert (roll["pod"], roll["uid"], roll["reason"]) == ("svc-0", "u0", "NodeLost")
    assert "atlas-a2-1" in roll["message"]
    assert kube.obj("Pod", "svc-0") is None  # gone from the API at once: its replica slot is free
    assert kube.obj("Pod", "svc-1") is not None


async def test_a_pod_slow_to_terminate_on_a_live_node_is_never_forced(spec: Any) -> None:
    kube = cluster(
        pod("svc-0", "u0", "127.1.0.5", "atlas-a2-0", terminating=True), pod("svc-1", "u1", "127.1.0.6", "atlas-a2-0")
    )
    await one_pass(kube, spec, silent={"127.1.0.5"})  # its engine stopped answering: it is shutting down
    assert kube.requests("delete") == []
    assert kube.obj("Pod", "svc-0") is not None


async def test_an_engine_that_answers_from_a_silent_node_is_not_given_up(spec: Any) -> None:
    kube = cluster(pod("svc-0", "u0", "127.1.1.5", "atlas-a2-1"), pod("svc-1", "u1", "127.1.0.5", "atlas-a2-0"))
    await one_pass(kube, spec, silent=set())
    assert kube.requests("delete") == []


async def test_inside_the_window_nothing_is_forced(spec: Any) -> None:
    patient = spec.model_copy(update={"health": spec.health.model_copy(update={"node_lost_seconds": 600})})
    kube = cluster(pod("svc-0", "u0", "127.1.1.5", "atlas-a2-1"), pod("svc-1", "u1", "127.1.0.5", "atlas-a2-0"))
    await one_pass(kube, patient, silent={"127.1.1.5"})
    assert kube.requests("delete") == []


async def test_a_group_with_a_worker_on_a_lost_node_is_recreated_and_the_worker_forced_out() -> None:
    parsed = parse_resource(yaml.safe_load((EXAMPLE.parent / "dsr1-2node.yaml").read_text()))

    def member(name: str, uid: str, index: int, ip: str, node: str) -> dict[str, Any]:
        raw = pod(name, uid, ip, node)
        raw["metadata"]["labels"] |= {
            "leaderworkerset.sigs.k8s.io/group-index": "0",
            "leaderworkerset.sigs.k8s.io/worker-index": str(index),
        }
        return raw

    kube = cluster(
        member("svc-group-0", "lead", 0, "127.1.0.5", "atlas-a2-0"),  # the leader's node is live, it answers
        member("svc-group-0-1", "work", 1, "127.1.1.5", "atlas-a2-1"),
    )
    memory = await one_pass(kube, parsed.spec, silent={"127.1.1.5"})
    assert memory.lost_nodes == frozenset({"atlas-a2-1"})
    assert [(c.name, c.grace_seconds) for c in kube.requests("delete")] == [("svc-group-0", 0), ("svc-group-0-1", 0)]
    roll = kube.obj(KIND, "svc")["status"]["rolls"][-1]  # type: ignore[index]
    assert (roll["pod"], roll["reason"]) == ("svc-group-0", "NodeLost")
    assert "svc-group-0-1" in roll["message"]


@pytest.mark.parametrize("terminating", [True, False], ids=["worker-terminating", "new-leader"])
async def test_a_worker_left_on_a_lost_node_goes_by_itself_and_the_new_leader_stays(terminating: bool) -> None:
    """Its group was already deleted (a stall roll: the leader's ranks stopped with the worker's node) and
    LeaderWorkerSet made a new leader, which waits for a worker of the same name: only the old worker goes,
    whether the garbage collector has marked it terminating yet or not (the new leader started after the
    node went silent)."""
    parsed = parse_resource(yaml.safe_load((EXAMPLE.parent / "dsr1-2node.yaml").read_text()))
    leader = pod("svc-group-0", "lead-2", "127.1.0.6", "atlas-a2-0")
    if not terminating:
        # NOW - 180 s: after the node last renewed its Lease (NOW - 300 s)
        leader["status"]["startTime"] = "2027-01-15T07:57:00Z"
    worker = pod("svc-group-0-1", "work-1", "127.1.1.5", "atlas-a2-1", terminating=terminating)
    for raw, index in ((leader, 0), (worker, 1)):
        raw["metadata"]["labels"] |= {
            "leaderworkerset.sigs.k8s.io/group-index": "0",
            "leaderworkerset.sigs.k8s.io/worker-index": str(index),
        }
    kube = cluster(leader, worker)
    await one_pass(kube, parsed.spec, silent={"127.1.1.5"})
    assert [(c.name, c.uid, c.grace_seconds) for c in kube.requests("delete")] == [("svc-group-0-1", "work-1", 0)]
    assert kube.obj("Pod", "svc-group-0") is not None
    roll = kube.obj(KIND, "svc")["status"]["rolls"][-1]  # type: ignore[index]
    assert (roll["pod"], roll["uid"], roll["reason"]) == ("svc-group-0-1", "work-1", "NodeLost")
