"""The pod planner, table-driven: what a user sees happen to pods for each situation."""

from dataclasses import replace

import pytest

from ascend_operator.controller.plan import Action, CreatePod, DeletePod, plan_pods
from ascend_operator.controller.views import PodView, pod_view
from ascend_operator.disruption import RollReason

NEW, OLD = "new", "old"


def pod(replica: int | None, *, hash: str = NEW, ready: bool = True, terminating: bool = False) -> PodView:
    return PodView(
        name=f"svc-{replica}",
        uid=f"uid-{replica}-{hash}-{terminating}",
        replica=replica,
        spec_hash=hash,
        phase="Running",
        ready=ready,
        terminating=terminating,
        node="n",
        ip="127.0.0.2",
        created=f"2026-11-29T00:00:0{replica or 0}Z",
        unschedulable=None,
    )


def delete(p: PodView, reason: RollReason) -> DeletePod:
    return DeletePod(name=p.name, uid=p.uid, reason=reason)


R = RollReason
CASES: list[tuple[str, int, list[PodView], list[Action]]] = [
    ("fresh service creates every replica", 2, [], [CreatePod(replica=0), CreatePod(replica=1)]),
    ("steady state does nothing", 2, [pod(0), pod(1)], []),
    ("a lost pod is recreated", 2, [pod(0)], [CreatePod(replica=1)]),
    (
        "scale down without request figures removes the highest index",
        1,
        [pod(0), pod(1)],
        [delete(pod(1), R.SCALE_DOWN)],
    ),
    ("a pod without replica label is removed", 1, [pod(0), pod(None)], [delete(pod(None), R.SCALE_DOWN)]),
    (
        "scale down removes a pod that serves nobody before a serving one",
        1,
        [pod(0, ready=False), pod(1)],
        [delete(pod(0, ready=False), R.SCALE_DOWN)],
    ),
    (
        "every stale replica is a candidate: the disruption budget takes them out one at a time",
        2,
        [pod(0, hash=OLD), pod(1, hash=OLD)],
        [delete(pod(0, hash=OLD), R.SPEC_CHANGED), delete(pod(1, hash=OLD), R.SPEC_CHANGED)],
    ),
    (
        "delete-then-create: a terminating pod keeps its slot (its NPUs are not free yet)",
        1,
        [pod(0, hash=OLD, terminating=True)],
        [],
    ),
    (
        "a gap left by a scale-down is filled by the next scale-up (lowest free index)",
        2,
        [pod(1)],
        [CreatePod(replica=0)],
    ),
    (
        "a new replica never takes the name of a pod still terminating",
        2,
        [pod(0, terminating=True), pod(1)],
        [],
    ),
    ("scale to zero deletes everything", 0, [pod(0)], [delete(pod(0), R.SCALE_DOWN)]),
]


@pytest.mark.parametrize(("replicas", "pods", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_plan(replicas: int, pods: list[PodView], expected: list[Action]) -> None:
    assert plan_pods(replicas=replicas, spec_hash=NEW, pods=pods) == expected


def test_scale_down_removes_the_replica_with_the_fewest_requests() -> None:
    busy, idle = pod(0), pod(1)
    assert plan_pods(replicas=1, spec_hash=NEW, pods=[busy, idle], in_flight={busy.uid: 0, idle.uid: 3}) == [
        delete(busy, R.SCALE_DOWN)
    ]
    assert plan_pods(replicas=1, spec_hash=NEW, pods=[busy, idle], in_flight={busy.uid: 5, idle.uid: 3}) == [
        delete(idle, R.SCALE_DOWN)
    ]


def test_scale_down_keeps_choosing_the_pod_that_already_drains() -> None:
    """Request counts move while a pod drains; the removal already under way is not switched to another."""
    draining = replace(pod(0, ready=False), drain={"since": "2026-11-29T00:00:00Z", "reason": "ScaleDown"})
    other = pod(1)
    assert plan_pods(replicas=1, spec_hash=NEW, pods=[draining, other], in_flight={draining.uid: 4, other.uid: 0}) == [
        delete(draining, R.SCALE_DOWN)
    ]


def test_duplicate_replica_keeps_the_oldest_pod() -> None:
    first = pod(0)
    twin = replace(pod(0), name="svc-0-twin", uid="twin", created="2026-11-29T01:00:00Z")
    assert plan_pods(replicas=1, spec_hash=NEW, pods=[twin, first]) == [delete(twin, R.DUPLICATE)]


def test_pod_view_reads_insufficient_npu_from_the_scheduler_condition() -> None:
    raw = {
        "metadata": {
            "name": "svc-1",
            "uid": "u",
            "labels": {"inference.ascend.dev/replica": "1"},
            "annotations": {"inference.ascend.dev/spec-hash": "h"},
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Insufficient huawei.com/Ascend910.",
                }
            ],
        },
    }
    view = pod_view(raw)
    assert view.replica == 1
    assert view.spec_hash == "h"
    assert not view.ready
    assert view.lacks_npus
