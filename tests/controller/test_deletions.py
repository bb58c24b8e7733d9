"""The disruption step's I/O against the in-memory API server: the roll record is written (with a
resourceVersion precondition) before the pod is deleted (with a uid precondition); a conflict means decide
again; a record whose pod survived a crash is completed by uid, never by name, so a successor is never
deleted."""

import json
import os
import signal
from collections.abc import Mapping
from typing import Any

import pytest

from ascend_operator.api.constants import API_VERSION, KIND
from ascend_operator.api.parse import ParsedService
from ascend_operator.api.status import Roll
from ascend_operator.controller import crashpoints
from ascend_operator.controller.deletions import Site, disrupt
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.disruption import Candidate, Delete, Drain, DrainResult, RollReason
from tests.fixtures.kube import FakeKube

NOW = 1_800_000_000.0
T0 = "2027-01-15T06:00:00Z"  # two hours before NOW: the startup grace is over
DRAIN = "inference.ascend.dev/drain"


def raw(name: str, uid: str, *, ready: bool = True, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "labels": {"inference.ascend.dev/service": "svc", "inference.ascend.dev/replica": name[-1]},
            "annotations": dict(annotations or {}),
        },
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.2",
            "startTime": T0,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def cluster(*pods: dict[str, Any], rolls: list[dict[str, Any]] | None = None, **status: Any) -> FakeKube:
    """The pods and the service object, its status holding `rolls` (and any other status fields)."""
    kube = FakeKube()
    service = {"kind": KIND, "apiVersion": API_VERSION, "metadata": {"name": "svc"}}
    kube.add(*pods, {**service, "status": {"rolls": list(rolls or []), **status}})
    return kube


def stored(kube: FakeKube) -> dict[str, Any]:
    """The service's stored status."""
    service = kube.obj(KIND, "svc")
    assert service is not None
    status: dict[str, Any] = service["status"]
    return status


def steps(kube: FakeKube) -> list[tuple[str, str]]:
    """The writes, in order: a status write (the roll record), a pod patch (drain note), a gate, a delete."""
    return [(c.verb, c.name) for c in kube.requests("status", "patch", "delete")]


def graces(kube: FakeKube) -> dict[str, int | None]:
    return {c.name: c.grace_seconds for c in kube.requests("delete")}


def site(kube: FakeKube, events: list[str], *, clock: float = NOW) -> Site:
    return Site(kube=kube, events=lambda t, r, m: events.append(r), namespace="ns", service="svc", clock=lambda: clock)


async def test_a_stall_is_recorded_before_its_pod_is_deleted(example: ParsedService) -> None:
    kube = cluster(raw("svc-0", "u0", ready=False), raw("svc-1", "u1"))
    memory, events = ServiceMemory(served={"u0", "u1"}), list[str]()
    stall = Candidate(pod="svc-0", uid="u0", reason=RollReason.STALLED, message="no progress for 36s")
    decision = await disrupt(site(kube, events), memory, example.spec, source="health", candidates=[stall])
    assert decision.action == Delete(
        pod="svc-0", uid="u0", reason=RollReason.STALLED, message="no progress for 36s", drain=DrainResult.NOT_DRAINED
    )
    assert steps(kube) == [("status", "svc"), ("delete", "svc-0")]
    assert [c.uid for c in kube.requests("delete")] == ["u0"]  # the uid precondition: never a successor
    assert kube.requests("status")[0].resource_version is not None  # the record's precondition
    # a stalled engine can finish nothing: its NPUs are freed 5 s after the SIGTERM, not after the pod's grace
    assert graces(kube) == {"svc-0": 5}
    record = {
        "time": "2027-01-15T08:00:00Z",
        "pod": "svc-0",
        "uid": "u0",
        "reason": "Stalled",
        "message": "no progress for 36s",
        "drain": "NotDrained",
    }
    assert stored(kube)["rolls"] == [record]
    assert stored(kube)["lastRoll"] == record
    assert memory.rolls == [Roll.model_validate(record)]
    assert events == ["Rolled"]


async def test_a_conflicting_status_write_deletes_nothing(example: ParsedService) -> None:
    kube = cluster(raw("svc-0", "u0", ready=False))
    kube.move_on(KIND, "svc")  # another writer gets in between this pass's read and its write
    memory = ServiceMemory(served={"u0"})
    stall = Candidate(pod="svc-0", uid="u0", reason=RollReason.STALLED)
    await disrupt(site(kube, []), memory, example.spec, source="health", candidates=[stall])
    assert steps(kube) == [("status", "svc")]
    assert stored(kube)["rolls"] == []
    await disrupt(site(kube, []), memory, example.spec, source="health", candidates=[stall])  # the next pass
    assert steps(kube) == [("status", "svc"), ("status", "svc"), ("delete", "svc-0")]
    assert [r["pod"] for r in stored(kube)["rolls"]] == ["svc-0"]


async def test_a_recorded_roll_whose_pod_survived_a_crash_is_completed_by_uid(example: ParsedService) -> None:
    """The operator died between the record and the delete: the restarted one deletes that uid, once."""
    recorded = {"time": "2027-01-15T08:00:00Z", "pod": "svc-0", "uid": "u0", "reason": "Stalled", "drain": "NotDrained"}
    kube = cluster(raw("svc-0", "u0", ready=False), raw("svc-1", "u1"), rolls=[recorded])
    memory = ServiceMemory(rolls=[Roll.model_validate(recorded)])
    await disrupt(site(kube, []), memory, example.spec, source="health", candidates=[])
    assert steps(kube) == [("delete", "svc-0")]
    assert kube.finish_terminating() == ["svc-0"]
    kube.add(raw("svc-0", "u0-successor", ready=False))  # the replacement loads under the same name
    await disrupt(site(kube, []), memory, example.spec, source="health", candidates=[])
    assert steps(kube) == [("delete", "svc-0")]
    assert stored(kube)["rolls"] == [recorded]


async def test_a_planned_deletion_drains_first_and_the_drain_survives_in_an_annotation(example: ParsedService) -> None:
    kube = cluster(raw("svc-0", "u0"), raw("svc-1", "u1"))
    memory, events = ServiceMemory(served={"u0", "u1"}, in_flight={"u0": 2, "u1": 0}), list[str]()
    spec = example.spec.model_copy(update={"replicas": 2})
    change = Candidate(pod="svc-0", uid="u0", reason=RollReason.SPEC_CHANGED, message="SpecChanged (spec x)")
    decision = await disrupt(site(kube, events), memory, spec, source="reconcile", candidates=[change])
    assert decision.action == Drain(
        pod="svc-0", uid="u0", reason=RollReason.SPEC_CHANGED, message="SpecChanged (spec x)"
    )
    assert steps(kube) == [("patch", "svc-0"), ("status", "svc-0")]
    pod = kube.obj("Pod", "svc-0")
    assert pod is not None
    note = json.loads(pod["metadata"]["annotations"][DRAIN])
    assert note["reason"] == "SpecChanged"
    gate = [c for c in pod["status"]["conditions"] if c["type"] == "inference.ascend.dev/engine-ready"]
    assert [(g["status"], g["reason"]) for g in gate] == [("False", "Draining")]
    assert events == ["Draining"]
    # the pod is now out (its gate False), a fresh memory (an operator restart) still sees the drain
    pod["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    restarted = ServiceMemory(served={"u0", "u1"}, in_flight={"u0": 0, "u1": 0}, scraped_at=NOW + 3590)
    decision = await disrupt(site(kube, [], clock=NOW + 3600), restarted, spec, source="health", candidates=[])
    assert isinstance(decision.action, Delete)
    assert decision.action.drain is DrainResult.COMPLETED
    assert steps(kube)[-2:] == [("status", "svc"), ("delete", "svc-0")]
    assert graces(kube) == {"svc-0": None}  # drained: the pod's own grace, vLLM's --shutdown-timeout inside it
    assert stored(kube)["lastRoll"]["drain"] == "Completed"


async def test_the_fault_point_kills_between_record_and_delete(
    example: ParsedService, monkeypatch: pytest.MonkeyPatch
) -> None:
    kills: list[int] = []
    monkeypatch.setenv(crashpoints.FAULT_AFTER_ROLL_RECORD, "1")
    monkeypatch.setattr(os, "kill", lambda pid, sig: kills.append(sig))
    kube = cluster(raw("svc-0", "u0", ready=False))
    stall = Candidate(pod="svc-0", uid="u0", reason=RollReason.STALLED)
    await disrupt(site(kube, []), ServiceMemory(served={"u0"}), example.spec, source="health", candidates=[stall])
    assert kills == [signal.SIGKILL]
    assert steps(kube)[0] == ("status", "svc")


def test_the_fault_point_is_inert_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    kills: list[int] = []
    monkeypatch.delenv(crashpoints.FAULT_AFTER_ROLL_RECORD, raising=False)
    monkeypatch.setattr(os, "kill", lambda pid, sig: kills.append(sig))
    crashpoints.after_roll_record()
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
    kube = cluster(raw("svc-0", "u0", ready=False), raw("svc-1", "u1"), rolls=rollout, healthRolls=stalls)
    memory = ServiceMemory(served={"u0", "u1"}, rolls=[Roll.model_validate(r) for r in rollout])
    spec = _limited(example)
    stall = Candidate(pod="svc-0", uid="u0", reason=RollReason.STALLED)
    decision = await disrupt(site(kube, []), memory, spec, source="health", candidates=[stall])
    assert decision.action is None
    assert [(h.candidate.pod, h.rule) for h in decision.held] == [("svc-0", "RateLimited")]
    assert not kube.requests("delete")


async def test_a_health_roll_adds_its_time_to_the_limits_record_and_drops_times_an_hour_old(
    example: ParsedService,
) -> None:
    ago = ["2027-01-15T06:30:00Z", "2027-01-15T07:30:00Z"]  # 90 and 30 minutes ago
    kube = cluster(raw("svc-0", "u0", ready=False), raw("svc-1", "u1"), healthRolls=ago)
    spec = _limited(example)
    stall = Candidate(pod="svc-0", uid="u0", reason=RollReason.STALLED)
    await disrupt(site(kube, []), ServiceMemory(served={"u0", "u1"}), spec, source="health", candidates=[stall])
    assert stored(kube)["healthRolls"] == ["2027-01-15T07:30:00Z", "2027-01-15T08:00:00Z"]
    assert steps(kube)[-1] == ("delete", "svc-0")


async def test_a_spec_change_leaves_the_limits_record_alone(example: ParsedService) -> None:
    kube = cluster(raw("svc-0", "u0", ready=False), raw("svc-1", "u1"), healthRolls=["2027-01-15T07:30:00Z"])
    change = Candidate(pod="svc-0", uid="u0", reason=RollReason.SPEC_CHANGED)
    await disrupt(
        site(kube, []), ServiceMemory(served={"u0", "u1"}), example.spec, source="reconcile", candidates=[change]
    )
    assert stored(kube)["healthRolls"] == ["2027-01-15T07:30:00Z"]
    assert stored(kube)["rolls"][-1]["reason"] == "SpecChanged"
