"""Every status the operator writes is valid under the CRD it ships: the API server prunes an unknown key
silently and refuses a wrong type, so a status that strays from the schema is a user who sees nothing.

The writes are the reconcile loop's status and the disruption step's roll records (a health roll with its
time in healthRolls, a group LeaderWorkerSet recreated on its own), all built as api/status.py models.
Each write is a JSON merge patch (RFC 7386) on the stored status; the check applies it as the API server
does and validates the result against the generated CRD's `status` schema, made strict on unknown keys
(the API server's pruning turned into an error, since a pruned key is the bug this guards against)."""

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pydantic
import pytest
import yaml

from ascend_operator.api.constants import KIND
from ascend_operator.api.parse import ParsedService
from ascend_operator.api.reasons import DegradedReason, PoolReason
from ascend_operator.api.status import AscendInferenceServiceStatus, LiveStatus, Roll, RouterStatus
from ascend_operator.controller.deletions import Site, disrupt, observe_groups
from ascend_operator.controller.groups import group_status
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.controller.status import ConditionRecord, Observed, compute_status, merge_patch, overlay, whole
from ascend_operator.controller.views import PodView, stored_status
from ascend_operator.disruption import Candidate, RollReason
from ascend_operator.health.aggregate import service_metrics
from ascend_operator.health.samples import EngineSample
from ascend_operator.render.lws import ANNOTATION_LEADERS
from tests.fixtures.kube import Call, FakeKube

CRD = Path(__file__).resolve().parents[2] / "crds" / "inference.ascend.dev_ascendinferenceservices.yaml"
T0, T1 = "2026-11-29T10:00:00Z", "2026-11-29T10:05:00Z"


def _strict(node: Any) -> Any:
    """The schema with `additionalProperties: false` wherever the API server would prune unknown keys."""
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _strict(value) for key, value in node.items()}
    prunes = "properties" in out and "additionalProperties" not in out
    if prunes and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def _status_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    return dict(_strict(schema))


VALIDATOR = jsonschema.Draft4Validator(_status_schema())  # OpenAPI 3.0's schema objects are Draft 4's


def merged(stored: Mapping[str, Any] | None, patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386: a null deletes, an object merges key by key, anything else (lists too) replaces."""
    out = copy.deepcopy(dict(stored or {}))
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def errors(stored: Mapping[str, Any] | None, patch: Mapping[str, Any]) -> list[str]:
    """What the API server would refuse or prune in the status that `patch` leaves (empty: valid)."""
    result = merged(stored, json.loads(json.dumps(patch)))  # the wire: tuples become lists
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(result)]


def pod(i: int, *, ready: bool = True, spec_hash: str = "h", group: int | None = None) -> PodView:
    return PodView(
        name=f"svc-{i}", uid=f"u{i}", replica=i if group is None else group, spec_hash=spec_hash,
        phase="Running" if ready else "Pending", ready=ready, terminating=False, node=f"atlas-{i}",
        ip="10.0.0.1", created=T0, unschedulable=None, worker_index=None if group is None else i % 2,
    )  # fmt: skip


def live_figures() -> AscendInferenceServiceStatus:
    """The health loop's real status fields for one pod serving a speculative model."""
    before = EngineSample(t=0.0, generation_tokens=0.0, spec_drafts=0.0, spec_draft_tokens=0.0, spec_accepted=0.0)
    after = EngineSample(
        t=5.0, running=3.0, waiting=1.0, kv_usage=0.25, generation_tokens=500.0, preemptions=0.0,
        spec_drafts=100.0, spec_draft_tokens=300.0, spec_accepted=180.0, spec_accepted_per_pos={0: 80.0, 1: 60.0},
    )  # fmt: skip
    figures = service_metrics([[before, after]], now=5.0)
    assert figures.metrics is not None
    assert figures.metrics.acceptance_per_position  # the widest metrics object the loop writes
    return overlay(AscendInferenceServiceStatus(), figures)


def base(**kw: Any) -> Observed:
    fields: dict[str, Any] = {"generation": 3, "replicas": 2, "spec_hash": "h", "pods": [pod(0), pod(1)]}
    fields |= {"service": "svc", "endpoint": "http://svc.ns.svc:8000", "selector": "app=svc"}
    return Observed(**(fields | kw))


def test_every_status_the_reconcile_loop_writes_is_valid_under_the_crd() -> None:
    serving = compute_status(base(extra=live_figures()), previous=None, now=T0)
    deferred = ConditionRecord("Degraded", "True", DegradedReason.ROLL_DEFERRED, "Stalled on svc-0: MaxUnavailable")
    groups = [pod(0, group=0), pod(1, group=0), pod(2, group=1)]
    after_serving = {  # what the status shows -> the pass's observation, written over `serving`
        "one replica loads": base(pods=[pod(0), pod(1, ready=False)]),
        "the spec turns invalid": base(spec_hash=None, endpoint=None, errors=["spec.engine: too big [HBMBudget]"]),
        "the engine figures go": base(extra=overlay(AscendInferenceServiceStatus(), service_metrics([], now=9.0))),
        "a health roll is deferred, the pool synced": base(
            overrides=[deferred],
            extra_conditions=[ConditionRecord("InferencePoolReady", "True", PoolReason.SYNCED, "pool svc")],
        ),
        "a multi-node service's groups": base(
            pods=groups, extra=AscendInferenceServiceStatus(groups=group_status(groups, size=2))
        ),
        "scaled to zero": base(replicas=0, pods=[]),
    }
    assert errors(None, serving) == []
    assert not {"rolls", "lastRoll"} & set(serving)  # the disruption step's: a status write never resets them
    writes = {
        what: compute_status(o, previous=stored_status({"status": serving}), now=T1)
        for what, o in after_serving.items()
    }
    for what, patch in writes.items():
        assert errors(serving, patch) == [], what
        assert errors(None, patch) == [], what  # also as the first write
    invalid = merged(serving, writes["the spec turns invalid"])
    assert "specHash" not in invalid  # the nulls cleared what no longer holds
    assert "endpoint" not in invalid
    assert "metrics" not in merged(serving, writes["the engine figures go"])
    assert len(merged(serving, writes["a multi-node service's groups"])["groups"]) == 2


def test_a_misspelt_or_mistyped_status_field_fails_before_it_reaches_the_api_server() -> None:
    with pytest.raises(pydantic.ValidationError, match="tokensPerSecondDisply"):
        LiveStatus.model_validate({"tokensPerSecondDisply": "812.4"})
    with pytest.raises(pydantic.ValidationError, match="runningRequests"):
        LiveStatus.model_validate({"metrics": {"runningRequests": "three"}})
    with pytest.raises(pydantic.ValidationError, match="status"):
        compute_status(
            base(overrides=[ConditionRecord("Degraded", "Yes", DegradedReason.ROLL_DEFERRED, "x")]),
            previous=None,
            now=T0,
        )


def test_the_schema_check_refuses_what_the_api_server_prunes_or_refuses() -> None:
    """The check itself can fail: a key the schema lacks, a wrong type, a null inside a list, a bad reason."""
    good = compute_status(base(), previous=None, now=T0)
    assert errors(None, good) == []
    cond = dict(good["conditions"][0])
    bad: list[dict[str, Any]] = [
        {"conditons": []},
        {"readyReplicas": "2"},
        {"metrics": {"tokensPerSecnd": 1.0}},
        {"conditions": [{**cond, "observedGeneration": None}]},
        {"conditions": [{**cond, "reason": "not camel"}]},
        {"groups": [{"index": 0, "nodes": "atlas-0"}]},
        {"rolls": [{"time": T0, "pod": "svc-0"}]},
    ]
    for patch in bad:
        assert errors(good, patch), patch


class Recording:
    """The in-memory API server holding the pods and the service, and each status write with the status it
    was written over: (stored, patch)."""

    def __init__(self, pods: list[dict[str, Any]], status: dict[str, Any]) -> None:
        self.kube = FakeKube()
        self.kube.add(*pods, {"kind": KIND, "metadata": {"name": "svc"}, "status": copy.deepcopy(status)})
        self.patches: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.kube.before("status", KIND, self._note)

    async def _note(self, call: Call) -> None:
        service = self.kube.obj(KIND, "svc")
        assert service is not None
        self.patches.append((copy.deepcopy(service["status"]), copy.deepcopy(call.body["status"])))


NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
EARLIER: dict[str, Any] = {  # what an earlier roll left: a record of every field, and the hourly limit's own record
    "rolls": [
        {"time": "2027-01-15T07:30:00Z", "pod": "svc-0", "uid": "u-old", "reason": "MaxAge", "drain": "Completed"}
    ],
    "healthRolls": ["2027-01-15T06:30:00Z", "2027-01-15T07:30:00Z"],  # the first is over an hour old: dropped
}


def recording_site(recording: Recording) -> Site:
    return Site(kube=recording.kube, events=lambda *_: None, namespace="ns", service="svc", clock=lambda: NOW)


async def test_the_roll_record_the_disruption_step_writes_is_valid_under_the_crd(example: ParsedService) -> None:
    stalled = {
        "kind": "Pod",
        "metadata": {
            "name": "svc-0",
            "uid": "u0",
            "labels": {"inference.ascend.dev/replica": "0", "inference.ascend.dev/service": "svc"},
        },
        "status": {"phase": "Running", "startTime": T0, "conditions": [{"type": "Ready", "status": "False"}]},
    }
    kube = Recording([stalled], compute_status(base(), previous=None, now=T0) | EARLIER)
    stall = Candidate(pod="svc-0", uid="u0", reason=RollReason.STALLED, message="no forward progress for 36s")
    memory = ServiceMemory(served={"u0"})
    await disrupt(recording_site(kube), memory, example.spec, source="health", candidates=[stall])
    assert [patch["lastRoll"]["reason"] for _, patch in kube.patches] == ["Stalled"]
    ((stored, patch),) = kube.patches
    assert errors(stored, patch) == []
    assert patch["healthRolls"] == ["2027-01-15T07:30:00Z", "2027-01-15T08:00:00Z"]  # a health roll's time
    assert patch["rolls"] == [EARLIER["rolls"][0], patch["lastRoll"]]  # the stored record as it was
    assert set(patch["lastRoll"]) == {"time", "pod", "uid", "reason", "message", "drain"}
    assert memory.rolls == [Roll.model_validate(r) for r in patch["rolls"]]


async def test_the_record_of_a_group_recreated_on_its_own_is_valid_under_the_crd() -> None:
    """LeaderWorkerSet replaced group 0's leader (u-gone) by itself: observe_groups records it, with no
    health time (the hourly limit counts the operator's own health rolls only)."""
    kube = Recording([], compute_status(base(), previous=None, now=T0) | EARLIER)
    leaders = json.dumps({"0": ["u-gone", "h"]})
    lws = {"metadata": {"annotations": {ANNOTATION_LEADERS: leaders}}, "spec": {"replicas": 1}}
    memory = ServiceMemory()
    await observe_groups(recording_site(kube), memory, lws, [pod(0, group=0), pod(1, group=0)])
    ((stored, patch),) = kube.patches
    assert errors(stored, patch) == []
    assert (patch["lastRoll"]["reason"], patch["lastRoll"]["uid"]) == ("GroupRecreated", "u-gone")
    assert "healthRolls" not in patch
    assert [r.reason for r in memory.rolls] == ["MaxAge", "GroupRecreated"]


def test_a_misspelt_or_missing_roll_field_fails_before_it_reaches_the_api_server() -> None:
    record = {"time": T0, "pod": "svc-0", "uid": "u0", "reason": "Stalled", "drain": "NotDrained"}
    assert errors(None, merge_patch(AscendInferenceServiceStatus(rolls=[Roll.model_validate(record)]))) == []
    with pytest.raises(pydantic.ValidationError, match="drian"):
        Roll.model_validate({**record, "drian": "NotDrained"})
    with pytest.raises(pydantic.ValidationError, match="reason"):
        Roll.model_validate({k: v for k, v in record.items() if k != "reason"})


def test_the_live_part_is_a_slice_of_the_status() -> None:
    """What the health loop keeps is laid over the status by field name: each must be the status's own."""
    for name, info in LiveStatus.model_fields.items():
        full = AscendInferenceServiceStatus.model_fields[name]
        assert (info.alias, info.annotation) == (full.alias, full.annotation), name


def test_a_part_writes_the_fields_it_set_and_nothing_else() -> None:
    assert merge_patch(overlay(AscendInferenceServiceStatus(), LiveStatus(metrics=None))) == {"metrics": None}
    assert merge_patch(overlay(AscendInferenceServiceStatus(), LiveStatus())) == {}
    router = RouterStatus(service="svc-router", replicas=2)  # the rest left to their defaults
    written = merge_patch(AscendInferenceServiceStatus(router=whole(router)))
    assert written == {"router": router.model_dump(by_alias=True, mode="json")}  # every field, defaults too
    assert written["router"]["queueSize"] == 0
