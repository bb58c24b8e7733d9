"""Compute a service's status from what was observed: a pure function of its inputs and the clock value.

Conditions keep their lastTransitionTime while their status does not change, so recomputing the same
status yields the same dict and the reconcile loop can patch only on a real change.

The status is built as the `ascend_operator.api.status` models (the ones the CRD's schema is generated
from), so a misspelt key or a wrong type fails here, in a test, instead of being pruned by the API server;
what is written is their merge patch (`merge_patch`). Ready means every
desired replica serves, Available that at least one does (`kubectl wait --for=condition=Available` on a
service with 1 of 2 replicas up); when a replica does not serve, the reasons name its first blocking cause
(`ascend_operator.controller.causes`), not a generic "waiting".
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel

from ascend_operator.api.reasons import (
    AvailableReason,
    DegradedReason,
    ProgressingReason,
    ReadyReason,
    Relayed,
    ReplicaReason,
    VerdictReason,
)
from ascend_operator.api.status import (
    AVAILABLE,
    DEGRADED,
    INFERENCE_POOL_READY,
    PROGRESSING,
    READY,
    AnyEventReason,
    AscendInferenceServiceStatus,
    Condition,
    ConditionReason,
    LiveStatus,
)
from ascend_operator.controller.causes import Cause, replica_causes, summary, worst
from ascend_operator.controller.views import PodView


class ConditionRecord(NamedTuple):
    """A condition as decided, before its transition time and generation are stamped on it."""

    type: str
    status: str
    reason: ConditionReason
    message: str


class PodFault(NamedTuple):
    """A health fault the health loop found on a pod (ConfigMismatch, Stalled)."""

    reason: VerdictReason
    message: str


class Event(NamedTuple):
    """A Kubernetes event to post about the service."""

    type: str
    reason: AnyEventReason
    message: str


@dataclass(frozen=True, kw_only=True)
class Observed:
    """Everything the status depends on."""

    generation: int | None
    replicas: int
    spec_hash: str | None
    """None when the current spec is invalid (nothing is rolled to it)."""
    pods: Sequence[PodView]
    service: str = ""
    """The service's name: a replica without a pod is named after it."""
    endpoint: str | None = None
    """The in-cluster URL of the Service (None while the spec is invalid)."""
    errors: Sequence[str] = ()
    """Validation errors of the current spec, each naming the field and the rule."""
    mount_failures: Mapping[str, str] = field(default_factory=dict)
    """Pod name -> message of its latest FailedMount event."""
    create_failures: Mapping[str, str] = field(default_factory=dict)
    """Pod name -> the API server's message for a refused create (the replica shows PodCreateFailed)."""
    health: Mapping[str, PodFault] = field(default_factory=dict)
    """Pod uid -> the fault the health loop found."""
    extra: AscendInferenceServiceStatus = field(default_factory=AscendInferenceServiceStatus)
    """Further status fields computed elsewhere (the health loop's `LiveStatus`, the router, the groups, the
    roles, the rollout): the fields it sets are laid over the computed ones (`overlay`)."""
    overrides: Sequence[ConditionRecord] = ()
    """Conditions that replace the computed condition of their type."""
    selector: str | None = None
    """The engine pods' label selector, published for the scale subresource."""
    extra_conditions: Sequence[ConditionRecord] = ()
    """Conditions of optional features (InferencePoolReady), appended after the four computed ones."""


def _cond(kind: str, ok: bool, reason: ConditionReason, message: str) -> ConditionRecord:
    return ConditionRecord(kind, "True" if ok else "False", reason, message)


def _causes(obs: Observed) -> list[Cause]:
    return replica_causes(
        obs.pods,
        service=obs.service,
        replicas=obs.replicas,
        mount_failures=obs.mount_failures,
        health=obs.health,
        create_failures=obs.create_failures,
    )


def _ready(obs: Observed, ready: int, causes: Sequence[Cause]) -> ConditionRecord:
    if obs.errors and ready == 0:
        return _cond(READY, False, ReadyReason.INVALID_SPEC, "; ".join(obs.errors))
    if obs.replicas == 0:
        return _cond(READY, True, ReadyReason.SCALED_TO_ZERO, "spec.replicas is 0")
    if ready >= obs.replicas:
        reason = ReadyReason.SERVING_PREVIOUS_SPEC if obs.errors else ReadyReason.ALL_REPLICAS_READY
        return _cond(READY, True, reason, f"{ready}/{obs.replicas} replicas ready")
    first = worst(causes)
    if first is None:
        return _cond(READY, False, ReplicaReason.WAITING_FOR_REPLICAS, f"{ready}/{obs.replicas} replicas ready")
    return _cond(READY, False, first.reason, f"{ready}/{obs.replicas} replicas ready; {summary(causes, first)}")


def _available(obs: Observed, ready: int, causes: Sequence[Cause]) -> ConditionRecord:
    """At least one replica serves: what `kubectl wait --for=condition=Available` waits for."""
    if ready > 0:
        reason = AvailableReason.SERVING_PREVIOUS_SPEC if obs.errors else AvailableReason.REPLICAS_SERVING
        return _cond(AVAILABLE, True, reason, f"{ready}/{obs.replicas} replicas ready")
    if obs.errors:
        return _cond(AVAILABLE, False, AvailableReason.INVALID_SPEC, "; ".join(obs.errors))
    if obs.replicas == 0:
        return _cond(AVAILABLE, False, AvailableReason.SCALED_TO_ZERO, "spec.replicas is 0")
    first = worst(causes)
    if first is None:
        return _cond(AVAILABLE, False, ReplicaReason.WAITING_FOR_REPLICAS, f"0/{obs.replicas} replicas ready")
    return _cond(AVAILABLE, False, first.reason, f"no replica serves; {summary(causes, first)}")


def _progressing(obs: Observed, ready: int) -> ConditionRecord:
    if obs.errors:
        return _cond(
            PROGRESSING, False, ProgressingReason.INVALID_SPEC, "the current spec is not rolled out: it is invalid"
        )
    live = [p for p in obs.pods if not p.terminating]
    stale = [p for p in live if p.spec_hash != obs.spec_hash]
    if stale:
        return _cond(
            PROGRESSING, True, ProgressingReason.ROLLING_UPDATE, f"{len(stale)} replica(s) still run an older spec"
        )
    if len(live) != obs.replicas or any(p.terminating for p in obs.pods):
        return _cond(
            PROGRESSING, True, ProgressingReason.SCALING_REPLICAS, f"{len(live)} pods for {obs.replicas} replicas"
        )
    if ready < obs.replicas:
        return _cond(
            PROGRESSING, True, ProgressingReason.WAITING_FOR_REPLICAS, f"{ready}/{obs.replicas} replicas ready"
        )
    return _cond(
        PROGRESSING, False, ProgressingReason.REPLICAS_UP_TO_DATE, "all replicas run the current spec and are ready"
    )


def _degraded(obs: Observed, causes: Sequence[Cause]) -> ConditionRecord:
    if obs.errors:
        return _cond(DEGRADED, True, DegradedReason.INVALID_SPEC, "; ".join(obs.errors))
    faults = [c for c in causes if c.fault]
    first = worst(faults)
    if first is not None:
        return _cond(DEGRADED, True, first.reason, summary(faults, first))
    return _cond(DEGRADED, False, DegradedReason.AS_EXPECTED, "")


def _stamped(cond: ConditionRecord, *, before: Mapping[str, Condition], generation: int | None, now: str) -> Condition:
    """The condition with its lastTransitionTime kept while its status holds, and the generation."""
    old = before.get(cond.type)
    since = old.last_transition_time if old is not None and old.status == cond.status else None
    stamped = Condition(
        type=cond.type, status=cond.status, reason=cond.reason, message=cond.message, last_transition_time=since or now
    )
    # None would be a null inside a list item, which the schema refuses (only a top-level null clears)
    return stamped if generation is None else stamped.model_copy(update={"observed_generation": generation})


def build_status(
    obs: Observed, *, previous: AscendInferenceServiceStatus | None, now: str
) -> AscendInferenceServiceStatus:
    """The status the operator owns, as the API model. Only the fields it sets are its to write: the
    rolls (written by the disruption step) are left unset, and a field set to None is one to clear.
    `previous`: the status as it stands, read through the model (controller/views.py `stored_status`)."""
    live = [p for p in obs.pods if not p.terminating]
    ready = sum(1 for p in live if p.ready)
    causes = _causes(obs)
    computed = [
        _ready(obs, ready, causes),
        _available(obs, ready, causes),
        _progressing(obs, ready),
        _degraded(obs, causes),
        *obs.extra_conditions,
    ]
    replaced = {c.type: c for c in obs.overrides}
    before = {c.type: c for c in previous.conditions} if previous is not None else {}
    status = AscendInferenceServiceStatus(
        observed_generation=obs.generation,
        replicas=len(live),
        ready_replicas=ready,
        desired_replicas=obs.replicas,
        updated_replicas=sum(1 for p in live if p.spec_hash == obs.spec_hash),
        restarts=sum(p.restarts for p in live),
        spec_hash=obs.spec_hash,
        endpoint=obs.endpoint,
        conditions=[
            _stamped(replaced.get(c.type, c), before=before, generation=obs.generation, now=now) for c in computed
        ],
    )
    if obs.selector is not None:
        status = status.model_copy(update={"selector": obs.selector})
    return overlay(status, obs.extra)


M = TypeVar("M", bound=BaseModel)


def overlay(status: M, *parts: BaseModel) -> M:
    """`status` with the fields each part set laid over it, in order. A part is a slice of the status (the
    same field names: `LiveStatus`, or a partial status), and the result is validated: a field the status
    lacks, or a value of another type, raises here, in a test, instead of being pruned by the API server.
    Which fields are set is kept (nested models are taken as they are), so `merge_patch` writes exactly
    the fields someone set."""
    fields = {name: getattr(status, name) for name in status.model_fields_set}
    for part in parts:
        fields |= {name: getattr(part, name) for name in part.model_fields_set}
    return type(status).model_validate(fields)


def whole(model: M) -> M:
    """`model` with every field marked set, defaults included, so the patch writes each of them (a nested
    object written entire, as the router's and the roles' are)."""
    return type(model).model_validate(model.model_dump())


def without(model: M, name: str) -> M:
    """`model` with field `name` unset: the patch no longer writes it (the stored value stays)."""
    return type(model).model_validate({n: getattr(model, n) for n in model.model_fields_set - {name}})


def merge_patch(status: BaseModel) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that writes `status`: the fields it set, camelCase; a None is a
    null, which deletes the stored field (a spec turned invalid clears specHash and endpoint); fields it
    left unset are not touched."""
    return status.model_dump(by_alias=True, mode="json", exclude_unset=True)


def compute_status(obs: Observed, *, previous: AscendInferenceServiceStatus | None, now: str) -> dict[str, Any]:
    """The status patch (camelCase, as stored) of `build_status`."""
    return merge_patch(build_status(obs, previous=previous, now=now))


def changed_keys(current: Mapping[str, Any] | None, new: Mapping[str, Any]) -> set[str]:
    """The keys of `new` whose patch would change what is stored."""
    current = current or {}
    return {key for key, value in new.items() if current.get(key) != value}


def status_changed(current: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether patching `new` would change anything the operator owns."""
    return bool(changed_keys(current, new))


#: Status keys the health loop refreshes at scrape rate (health/aggregate.py service_metrics): written at
#: most every `live_interval` seconds (`aisctl operator --status-interval-seconds`, default 30). Everything
#: else (conditions, replicas, the spec hash) is written as soon as it changes.
LIVE_KEYS = frozenset(info.alias or name for name, info in LiveStatus.model_fields.items())
DEFAULT_LIVE_INTERVAL = 30.0


def status_due(
    current: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    *,
    live_written_at: float | None,
    now: float,
    live_interval: float,
) -> bool:
    """Whether to patch `new`: something other than the live engine figures changed, or only those did and
    their last write is `live_interval` seconds old (an etcd write and a watch event to every watcher of the
    service each time: at scrape rate that is most of an idle fleet's API traffic)."""
    changed = changed_keys(current, new)
    if not changed:
        return False
    if changed <= LIVE_KEYS and live_written_at is not None:
        return now - live_written_at >= live_interval
    return True


def condition_events(previous: AscendInferenceServiceStatus | None, new: Mapping[str, Any]) -> list[Event]:
    """Events for condition transitions worth telling: Degraded turning True (or changing reason), Ready,
    and the InferencePool going in or out of sync. `previous` as it stood (typed), `new` the patch written."""
    before = {c.type: c for c in previous.conditions} if previous is not None else {}
    events: list[Event] = []
    for cond in new.get("conditions") or []:
        old = before.get(cond["type"])
        moved = old is None or (old.status, old.reason) != (cond["status"], cond["reason"])
        if not moved:
            continue
        reason = Relayed(cond["reason"])  # typed when `build_status` made the condition
        if cond["type"] == DEGRADED and cond["status"] == "True":
            events.append(Event("Warning", reason, cond["message"]))
        elif cond["type"] == READY and cond["status"] == "True":
            events.append(Event("Normal", reason, cond["message"]))
        elif cond["type"] == INFERENCE_POOL_READY:
            events.append(Event("Normal" if cond["status"] == "True" else "Warning", reason, cond["message"]))
    return events
