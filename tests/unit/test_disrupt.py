"""The disruption step's I/O with a fake API server: the roll record is written (with a resourceVersion
precondition) before the pod is deleted (with a uid precondition); a conflict means decide again; a record
whose pod survived a crash is completed by uid, never by name, so a successor is never deleted."""

import json
from collections.abc import Mapping
from typing import Any

import pytest

from ascend_operator.api.parse import ParsedService
from ascend_operator.controller import faults
from ascend_operator.controller.disrupt import Site, disrupt
from ascend_operator.controller.memory import ServiceMemory
from ascend_operator.disruption import Candidate, Delete, Drain, DrainResult, RollReason

NOW = 1_800_000_000.0
T0 = "2027-01-15T06:00:00Z"  # two hours before NOW: the startup grace is over
STAMP = "2027-01-15T08:00:00Z"


def raw(name: str, uid: str, *, ready: bool = True, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "labels": {"inference.ascend.dev/replica": name[-1]},
            "annotations": dict(annotations or {}),
        },
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.2",
            "startTime": T0,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


class FakeKube:
    def __init__(self, pods: list[dict[str, Any]], rolls: list[dict[str, Any]] | None = None) -> None:
        self.pods = pods
        self.status: dict[str, Any] = {"rolls": list(rolls or [])}
        self.version = 7
        self.calls: list[tuple[str, ...]] = []
        self.conflict_once = False

    async def list_pods(self, namespace: str, service: str) -> list[dict[str, Any]]:
        return self.pods

    async def read_ais(self, namespace: str, name: str) -> dict[str, Any]:
        return {"metadata": {"resourceVersion": str(self.version)}, "status": json.loads(json.dumps(self.status))}

    async def patch_status_at(self, namespace: str, name: str, version: str, status: Mapping[str, Any]) -> bool:
        self.calls.append(("record", version))
        if self.conflict_once:
            self.conflict_once = False
            self.version += 1
            return False
        assert version == str(self.version)
        self.status.update(status)
        self.version += 1
        return True

    async def delete_pod(self, namespace: str, name: str, uid: str) -> bool:
        self.calls.append(("delete", name, uid))
        found = [p for p in self.pods if p["metadata"]["uid"] == uid]
        for p in found:
            p["metadata"]["deletionTimestamp"] = STAMP
        return bool(found)

    async def patch_pod(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        self.calls.append(("annotate", name, *patch["metadata"]["annotations"]))
        for p in self.pods:
            if p["metadata"]["name"] == name:
                p["metadata"]["annotations"].update(patch["metadata"]["annotations"])
        return True

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        cond = patch["status"]["conditions"][0]
        self.calls.append(("gate", name, cond["status"], cond["reason"]))
        return True


def site(kube: FakeKube, events: list[str]) -> Site:
    return Site(kube=kube, events=lambda t, r, m: events.append(r), namespace="ns", service="svc", clock=lambda: NOW)  # type: ignore[arg-type]


async def test_a_stall_is_recorded_before_its_pod_is_deleted(example: ParsedService) -> None:
    kube = FakeKube([raw("svc-0", "u0", ready=False), raw("svc-1", "u1")])
    memory, events = ServiceMemory(served={"u0", "u1"}), list[str]()
    stall = Candidate(pod="svc-0", uid="u0", reason=RollReason.STALLED, message="no progress for 36s")
    decision = await disrupt(site(kube, events), memory, example.spec, source="health", candidates=[stall])
    assert decision.action == Delete(
        pod="svc-0", uid="u0", reason=RollReason.STALLED, message="no progress for 36s", drain=DrainResult.NOT_DRAINED
    )
    assert kube.calls == [("record", "7"), ("delete", "svc-0", "u0")]
    record = {
        "time": "2027-01-15T08:00:00Z",
        "pod": "svc-0",
        "uid": "u0",
        "reason": "Stalled",
        "message": "no progress for 36s",
        "drain": "NotDrained",
    }
    assert kube.status["rolls"] == [record]
    assert kube.status["lastRoll"] == record
    assert memory.rolls == [record]
    assert events == ["Rolled"]


async def test_a_conflicting_status_write_deletes_nothing(example: ParsedService) -> None:
    kube = FakeKube([raw("svc-0", "u0", ready=False)])
    kube.conflict_once = True
    memory = ServiceMemory(served={"u0"})
    stall = Candidate(pod="svc-0", uid="u0", reason=RollReason.STALLED)
    await disrupt(site(kube, []), memory, example.spec, source="health", candidates=[stall])
    assert kube.calls == [("record", "7")]
    await disrupt(site(kube, []), memory, example.spec, source="health", candidates=[stall])  # the next pass
    assert kube.calls == [("record", "7"), ("record", "8"), ("delete", "svc-0", "u0")]


async def test_a_recorded_roll_whose_pod_survived_a_crash_is_completed_by_uid(example: ParsedService) -> None:
    """The operator died between the record and the delete: the restarted one deletes that uid, once."""
    recorded = {"time": "2027-01-15T08:00:00Z", "pod": "svc-0", "uid": "u0", "reason": "Stalled", "drain": "NotDrained"}
    kube = FakeKube([raw("svc-0", "u0", ready=False), raw("svc-1", "u1")], rolls=[recorded])
    memory = ServiceMemory(rolls=[recorded])
    await disrupt(site(kube, []), memory, example.spec, source="health", candidates=[])
    assert kube.calls == [("delete", "svc-0", "u0")]
    kube.pods = [raw("svc-0", "u0-successor", ready=False), raw("svc-1", "u1")]  # the replacement loads
    await disrupt(site(kube, []), memory, example.spec, source="health", candidates=[])
    assert kube.calls == [("delete", "svc-0", "u0")]
    assert kube.status["rolls"] == [recorded]


async def test_a_planned_deletion_drains_first_and_the_drain_survives_in_an_annotation(example: ParsedService) -> None:
    kube = FakeKube([raw("svc-0", "u0"), raw("svc-1", "u1")])
    memory, events = ServiceMemory(served={"u0", "u1"}, in_flight={"u0": 2, "u1": 0}), list[str]()
    spec = example.spec.model_copy(update={"replicas": 2})
    change = Candidate(pod="svc-0", uid="u0", reason=RollReason.SPEC_CHANGED, message="SpecChanged (spec x)")
    decision = await disrupt(site(kube, events), memory, spec, source="reconcile", candidates=[change])
    assert decision.action == Drain(
        pod="svc-0", uid="u0", reason=RollReason.SPEC_CHANGED, message="SpecChanged (spec x)"
    )
    assert kube.calls == [
        ("annotate", "svc-0", "inference.ascend.dev/drain"),
        ("gate", "svc-0", "False", "Draining"),
    ]
    note = json.loads(kube.pods[0]["metadata"]["annotations"]["inference.ascend.dev/drain"])
    assert note["reason"] == "SpecChanged"
    assert events == ["Draining"]
    # the pod is now out (its gate False), a fresh memory (an operator restart) still sees the drain
    kube.pods[0]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    restarted = ServiceMemory(served={"u0", "u1"}, in_flight={"u0": 0, "u1": 0}, scraped_at=NOW + 3590)
    later = Site(kube=kube, events=lambda t, r, m: None, namespace="ns", service="svc", clock=lambda: NOW + 3600)  # type: ignore[arg-type]
    decision = await disrupt(later, restarted, spec, source="health", candidates=[])
    assert isinstance(decision.action, Delete)
    assert decision.action.drain is DrainResult.COMPLETED
    assert kube.calls[-2:] == [("record", "7"), ("delete", "svc-0", "u0")]
    assert kube.status["lastRoll"]["drain"] == "Completed"


async def test_the_fault_point_kills_between_record_and_delete(
    example: ParsedService, monkeypatch: pytest.MonkeyPatch
) -> None:
    kills: list[int] = []
    monkeypatch.setenv(faults.FAULT_AFTER_ROLL_RECORD, "1")
    monkeypatch.setattr(faults.os, "kill", lambda pid, sig: kills.append(sig))
    kube = FakeKube([raw("svc-0", "u0", ready=False)])
    stall = Candidate(pod="svc-0", uid="u0", reason=RollReason.STALLED)
    await disrupt(site(kube, []), ServiceMemory(served={"u0"}), example.spec, source="health", candidates=[stall])
    assert kills == [faults.signal.SIGKILL]
    assert kube.calls[0] == ("record", "7")


def test_the_fault_point_is_inert_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    kills: list[int] = []
    monkeypatch.delenv(faults.FAULT_AFTER_ROLL_RECORD, raising=False)
    monkeypatch.setattr(faults.os, "kill", lambda pid, sig: kills.append(sig))
    faults.after_roll_record()
    assert kills == []
