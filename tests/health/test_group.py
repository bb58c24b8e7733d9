"""A group's verdict from its pods: a gone worker is named, and rolled only when LWS would not recreate it.

Pods are raw API objects read by controller/views.py (what the monitor lists), for a two-node service
whose LWS `svc-group` has leader `svc-group-0` and worker `svc-group-0-1`.
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

from ascend_operator.api.health import HealthSpec
from ascend_operator.api.parse import parse_resource
from ascend_operator.api.reasons import VerdictReason
from ascend_operator.controller.views import PodView, pod_view
from ascend_operator.disruption import RollReason
from ascend_operator.health.group import (
    GroupObservation,
    MissingWorker,
    name_ranks,
    observe,
    observe_group,
    rank_owners,
)
from ascend_operator.health.judge import PodHealth, Verdict, judge
from ascend_operator.health.machine import Observations, RequestRoll, SetGate, step
from ascend_operator.health.samples import EngineSample

ROOT = Path(__file__).resolve().parents[2]
LEADER = "svc-group-0"
WORKER = "svc-group-0-1"
WORKER_GONE = VerdictReason.WORKER_GONE
PASSING = Verdict(ready=True, reason=VerdictReason.CANARY_PASSING, message="tokens come back and the engine advances")


def judged(group: GroupObservation, *, served: bool) -> Verdict:
    """The leader's verdict with `group`, its own engine passing every other rule."""
    state = PodHealth(mismatches=(), served=served, last_canary=0.0, samples=(EngineSample(t=0.0),))
    return judge(state, now=0.0, cfg=HealthSpec(), group=group)


def pod(
    name: str,
    *,
    group: int = 0,
    index: int = 0,
    phase: str = "Running",
    ready: bool = True,
    deleting: bool = False,
    restarts: int = 0,
    waiting: tuple[str, str] | None = None,
) -> PodView:
    state: dict[str, Any] = (
        {"running": {}} if waiting is None else {"waiting": {"reason": waiting[0], "message": waiting[1]}}
    )
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "labels": {
            "leaderworkerset.sigs.k8s.io/group-index": str(group),
            "leaderworkerset.sigs.k8s.io/worker-index": str(index),
        },
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T12:00:00Z"
    return pod_view(
        {
            "metadata": meta,
            "status": {
                "phase": phase,
                "podIP": "127.1.0.2",
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                "containerStatuses": [{"name": "engine", "restartCount": restarts, "state": state}],
            },
        }
    )


def worker(**kw: Any) -> PodView:
    return pod(WORKER, index=1, **kw)


ROLL, NO_ROLL = RollReason.STALLED, None


@pytest.mark.parametrize(
    ("case", "workers", "served", "want"),
    [
        ("worker running", [worker()], True, None),
        ("worker deleted, gone", [], True, (f"worker {WORKER} has no pod", ROLL)),
        ("no worker yet while the group starts", [], False, None),
        (
            "worker being deleted: LWS recreates the group",
            [worker(deleting=True)],
            False,
            (f"worker {WORKER} is being deleted", NO_ROLL),
        ),
        (
            "recreated worker Pending after the group served",
            [worker(phase="Pending", ready=False, waiting=("ContainerCreating", ""))],
            True,
            (f"worker {WORKER} is Pending (ContainerCreating)", ROLL),
        ),
        (
            "worker Pending while the group starts",
            [worker(phase="Pending", ready=False, waiting=("ContainerCreating", ""))],
            False,
            None,
        ),
        (
            "worker's engine crash-looping: LWS recreates the group",
            [worker(ready=False, restarts=3, waiting=("CrashLoopBackOff", "back-off 40s"))],
            True,
            (f"worker {WORKER} restarted its engine container 3 time(s)", NO_ROLL),
        ),
        ("worker's node lost", [worker(phase="Unknown", ready=False)], True, (f"worker {WORKER} is Unknown", ROLL)),
        (
            "worker's node lost during the start: named, not rolled",
            [worker(phase="Unknown", ready=False)],
            False,
            (f"worker {WORKER} is Unknown", NO_ROLL),
        ),
        (
            "worker Running with its container not running",
            [worker(ready=False)],
            True,
            (f"worker {WORKER} runs no engine container", ROLL),
        ),
        ("a replacement beside the terminating pod", [worker(deleting=True), worker()], True, None),
        (
            "another group's worker does not stand in",
            [pod("svc-group-1-1", group=1, index=1)],
            True,
            (f"worker {WORKER} has no pod", ROLL),
        ),
    ],
)
def test_a_gone_worker_makes_the_group_verdict(
    case: str, workers: list[PodView], served: bool, want: tuple[str, RollReason | None] | None
) -> None:
    leader = pod(LEADER)
    group = observe_group(leader, [leader, *workers], size=2, local_ranks=2)
    verdict = judged(group, served=served)
    if want is None:
        assert verdict == PASSING, case
        return
    what, roll = want
    tail = " (LeaderWorkerSet recreates the group)" if "recreates" in case else ""
    assert verdict == Verdict(
        ready=False,
        reason=WORKER_GONE,
        message=f"group of {LEADER}: {what}; its ranks cannot progress{tail}",
        roll=roll,
        evidence={"workersGone": 1.0},
    ), case


def test_every_missing_worker_of_a_larger_group_is_named() -> None:
    leader = pod(LEADER)
    pods = [leader, pod("svc-group-0-1", index=1), pod("svc-group-0-3", index=3, phase="Failed", ready=False)]
    verdict = judged(observe_group(leader, pods, size=4, local_ranks=1), served=True)
    assert verdict.message == (
        f"group of {LEADER}: worker svc-group-0-2 has no pod; worker svc-group-0-3 is Failed; its ranks cannot progress"
    )
    assert verdict.evidence == {"workersGone": 2.0}


def test_stalled_ranks_are_named_with_the_pod_that_runs_them() -> None:
    assert name_ranks(
        "DP ranks 2, 3 of 4: ...", ("2", "3"), GroupObservation(leader=LEADER, size=2, local_ranks=2)
    ) == (f"DP ranks 2, 3 of 4: ...; ranks 2, 3 on {WORKER}")
    assert rank_owners(["0", "3", "5"], leader=LEADER, local_ranks=2) == {
        LEADER: ["0"],
        WORKER: ["3"],
        "svc-group-0-2": ["5"],
    }


def test_the_machine_writes_the_group_verdict_to_the_leader_gate_and_asks_for_the_roll() -> None:
    cfg = HealthSpec()
    state = PodHealth(mismatches=(), served=True, last_canary=0.0, gate=(True, "CanaryPassing"))
    for t in (0.0, 5.0):
        state, _, _ = step(state, Observations(sample=EngineSample(t=t, generation_tokens=t)), now=t, cfg=cfg)
    leader = pod(LEADER)
    group = observe_group(leader, [leader], size=2, local_ranks=2)
    state, verdict, actions = step(state, Observations(sample=EngineSample(t=10.0), group=group), now=10.0, cfg=cfg)
    assert verdict.reason == WORKER_GONE
    message = f"group of {LEADER}: worker {WORKER} has no pod; its ranks cannot progress"
    assert actions == (
        SetGate(ready=False, reason=WORKER_GONE, message=message),
        RequestRoll(reason=RollReason.STALLED, message=message, evidence={"workersGone": 1.0}),
    )
    assert state.gate == (False, WORKER_GONE)


def test_the_monitor_call_observes_leaders_of_the_two_node_example_only() -> None:
    two_node = parse_resource(yaml.safe_load((ROOT / "examples" / "dsr1-2node.yaml").read_text())).spec
    single = parse_resource(yaml.safe_load((ROOT / "examples" / "dsv4-flash.yaml").read_text())).spec
    leader, member = pod(LEADER), worker()
    assert observe(leader, [leader, member], two_node) == GroupObservation(leader=LEADER, size=2, local_ranks=2)
    assert observe(leader, [leader], two_node) == GroupObservation(
        leader=LEADER,
        size=2,
        local_ranks=2,
        missing=(MissingWorker(index=1, name=WORKER, why="has no pod", definite=False, lws_recreates=False),),
    )
    assert observe(member, [leader, member], two_node) is None
    plain = pod_view({"metadata": {"name": "dsv4-flash-0", "labels": {"inference.ascend.dev/replica": "0"}}})
    assert observe(plain, [plain], single) is None
