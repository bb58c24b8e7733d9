"""The disruption step's I/O with a fake API server: the roll record is written (with a resourceVersion
precondition) before the pod is deleted (with a uid precondition); a conflict means decide again; a record
whose pod survived a crash is completed by uid, never by name, so a successor is never deleted."""

import json
from collections.abc import Mapping
from typing import Any

import pytest

from ascend_operator.api.parse import ParsedService
from ascend_operator.api.status import Roll
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
        self.graces: dict[str, int | None] = {}
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

    async def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        self.calls.append(("delete", name, uid))
        self.graces[name] = grace_seconds
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
    # a stalled engine can finish nothing: its NPUs are freed 5 s after the SIGTERM, not after the pod's grace
    assert kube.graces == {"svc-0": 5}
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
    assert memory.rolls == [Roll.model_validate(record)]
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
    memory = ServiceMemory(rolls=[Roll.model_validate(recorded)])
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
    assert kube.graces == {"svc-0": None}  # drained: the pod's own grace, vLLM's --shutdown-timeout inside it
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


def _limited(example: ParsedService) -> Any:
    """The example with spec.health.rolls maxPerHour 3 and no cooldown."""
    rolls = example.spec.health.rolls.model_copy(update={"max_per_hour": 3, "cooldown_seconds": 0})
    return example.spec.model_copy(update={"health": example.spec.health.model_copy(update={"rolls": rolls})})


def _spec_change(i: int) -> dict[str, Any]:
    return {"time": f"2027-01-15T07:{i:02d}:00Z", "pod": f"svc-{i}", "uid": f"old-{i}", "reason": "SpecChanged"}


async def test_a_rollout_of_many_replicas_does_not_push_the_hours_health_rolls_out_of_the_limit(
    example: ParsedService,
) -> None:
    """Three stalls rolled in the last hour, then a rollout of 25 replicas filled status.rolls (20 kept):
    a fourth stall is still refused by spec.health.rolls.maxPerHour 3."""
    stalls = ["2027-01-15T07:10:00Z", "2027-01-15T07:25:00Z", "2027-01-15T07:40:00Z"]
    rollout = [_spec_change(i) for i in range(25)][-20:]
    kube = FakeKube([raw("svc-0", "u0", ready=False), raw("svc-1", "u1")], rolls=rollout)
    kube.status["healthRolls"] = stalls
    memory = ServiceMemory(served={"u0", "u1"}, rolls=[Roll.model_validate(r) for r in rollout])
    spec = _limited(example)
    stall = Candidate(pod="svc-0", uid="u0", reason=RollReason.STALLED)
    decision = await disrupt(site(kube, []), memory, spec, source="health", candidates=[stall])
    assert decision.action is None
    assert [(h.candidate.pod, h.rule) for h in decision.held] == [("svc-0", "RateLimited")]
    assert ("delete", "svc-0", "u0") not in kube.calls


async def test_a_health_roll_adds_its_time_to_the_limits_record_and_drops_times_an_hour_old(
    example: ParsedService,
) -> None:
    kube = FakeKube([raw("svc-0", "u0", ready=False), raw("svc-1", "u1")])
    kube.status["healthRolls"] = ["2027-01-15T06:30:00Z", "2027-01-15T07:30:00Z"]  # 90 and 30 minutes ago
    spec = _limited(example)
    stall = Candidate(pod="svc-0", uid="u0", reason=RollReason.STALLED)
    await disrupt(site(kube, []), ServiceMemory(served={"u0", "u1"}), spec, source="health", candidates=[stall])
    assert kube.status["healthRolls"] == ["2027-01-15T07:30:00Z", "2027-01-15T08:00:00Z"]
    assert ("delete", "svc-0", "u0") in kube.calls


async def test_a_spec_change_leaves_the_limits_record_alone(example: ParsedService) -> None:
    kube = FakeKube([raw("svc-0", "u0", ready=False), raw("svc-1", "u1")])
    kube.status["healthRolls"] = ["2027-01-15T07:30:00Z"]
    change = Candidate(pod="svc-0", uid="u0", reason=RollReason.SPEC_CHANGED)
    await disrupt(
        site(kube, []), ServiceMemory(served={"u0", "u1"}), example.spec, source="reconcile", candidates=[change]
    )
    assert kube.status["healthRolls"] == ["2027-01-15T07:30:00Z"]
    assert kube.status["rolls"][-1]["reason"] == "SpecChanged"
