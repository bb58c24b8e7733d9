"""Compute a service's status from what was observed: a pure function of its inputs and the clock value.

Conditions keep their lastTransitionTime while their status does not change, so recomputing the same
status yields the same dict and the reconcile loop can patch only on a real change. Ready means every
desired replica serves, Available that at least one does (`kubectl wait --for=condition=Available` on a
service with 1 of 2 replicas up); when a replica does not serve, the reasons name its first blocking cause
(`ascend_operator.controller.causes`), not a generic "waiting".
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ascend_operator.api.status import AVAILABLE, DEGRADED, INFERENCE_POOL_READY, PROGRESSING, READY
from ascend_operator.controller.causes import Cause, replica_causes, summary, worst
from ascend_operator.controller.views import PodView


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
    health: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Pod uid -> (reason, message) of a health fault (ConfigMismatch, Stalled) the health loop found."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Further status fields computed elsewhere (engine metrics, last roll), merged as given."""
    overrides: Sequence[tuple[str, str, str, str]] = ()
    """(type, status, reason, message) that replace the computed condition of that type."""
    selector: str | None = None
    """The engine pods' label selector, published for the scale subresource."""
    extra_conditions: Sequence[tuple[str, str, str, str]] = ()
    """Conditions of optional features (InferencePoolReady), appended after the four computed ones."""


Cond = tuple[str, str, str, str]


def _cond(kind: str, ok: bool, reason: str, message: str) -> Cond:
    return (kind, "True" if ok else "False", reason, message)


def _causes(obs: Observed) -> list[Cause]:
    return replica_causes(
        obs.pods,
        service=obs.service,
        replicas=obs.replicas,
        mount_failures=obs.mount_failures,
        health=obs.health,
        create_failures=obs.create_failures,
    )


def _ready(obs: Observed, ready: int, causes: Sequence[Cause]) -> Cond:
    if obs.errors and ready == 0:
        return _cond(READY, False, "InvalidSpec", "; ".join(obs.errors))
    if obs.replicas == 0:
        return _cond(READY, True, "ScaledToZero", "spec.replicas is 0")
    if ready >= obs.replicas:
        reason = "ServingPreviousSpec" if obs.errors else "AllReplicasReady"
        return _cond(READY, True, reason, f"{ready}/{obs.replicas} replicas ready")
    first = worst(causes)
    if first is None:
        return _cond(READY, False, "WaitingForReplicas", f"{ready}/{obs.replicas} replicas ready")
    return _cond(READY, False, first.reason, f"{ready}/{obs.replicas} replicas ready; {summary(causes, first)}")


def _available(obs: Observed, ready: int, causes: Sequence[Cause]) -> Cond:
    """At least one replica serves: what `kubectl wait --for=condition=Available` waits for."""
    if ready > 0:
        reason = "ServingPreviousSpec" if obs.errors else "ReplicasServing"
        return _cond(AVAILABLE, True, reason, f"{ready}/{obs.replicas} replicas ready")
    if obs.errors:
        return _cond(AVAILABLE, False, "InvalidSpec", "; ".join(obs.errors))
    if obs.replicas == 0:
        return _cond(AVAILABLE, False, "ScaledToZero", "spec.replicas is 0")
    first = worst(causes)
    if first is None:
        return _cond(AVAILABLE, False, "WaitingForReplicas", f"0/{obs.replicas} replicas ready")
    return _cond(AVAILABLE, False, first.reason, f"no replica serves; {summary(causes, first)}")


def _progressing(obs: Observed, ready: int) -> Cond:
    if obs.errors:
        return _cond(PROGRESSING, False, "InvalidSpec", "the current spec is not rolled out: it is invalid")
    live = [p for p in obs.pods if not p.terminating]
    stale = [p for p in live if p.spec_hash != obs.spec_hash]
    if stale:
        return _cond(PROGRESSING, True, "RollingUpdate", f"{len(stale)} replica(s) still run an older spec")
    if len(live) != obs.replicas or any(p.terminating for p in obs.pods):
        return _cond(PROGRESSING, True, "ScalingReplicas", f"{len(live)} pods for {obs.replicas} replicas")
    if ready < obs.replicas:
        return _cond(PROGRESSING, True, "WaitingForReplicas", f"{ready}/{obs.replicas} replicas ready")
    return _cond(PROGRESSING, False, "ReplicasUpToDate", "all replicas run the current spec and are ready")


def _degraded(obs: Observed, causes: Sequence[Cause]) -> Cond:
    if obs.errors:
        return _cond(DEGRADED, True, "InvalidSpec", "; ".join(obs.errors))
    faults = [c for c in causes if c.fault]
    first = worst(faults)
    if first is not None:
        return _cond(DEGRADED, True, first.reason, summary(faults, first))
    return _cond(DEGRADED, False, "AsExpected", "")


def compute_status(obs: Observed, *, previous: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    """The full status dict (camelCase, as stored)."""
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
    replaced = {kind: (kind, st, reason, msg) for kind, st, reason, msg in obs.overrides}
    before = {c.get("type"): c for c in (previous or {}).get("conditions") or []}
    conditions = []
    for kind, state, reason, message in (replaced.get(c[0], c) for c in computed):
        old = before.get(kind)
        since = old.get("lastTransitionTime") if old and old.get("status") == state else None
        conditions.append(
            {
                "type": kind,
                "status": state,
                "reason": reason,
                "message": message,
                "lastTransitionTime": since or now,
                "observedGeneration": obs.generation,
            }
        )
    status: dict[str, Any] = {
        "observedGeneration": obs.generation,
        "replicas": len(live),
        "readyReplicas": ready,
        "desiredReplicas": obs.replicas,
        "updatedReplicas": sum(1 for p in live if p.spec_hash == obs.spec_hash),
        "restarts": sum(p.restarts for p in live),
        "specHash": obs.spec_hash,
        "endpoint": obs.endpoint,
        "conditions": conditions,
    }
    if obs.selector is not None:
        status["selector"] = obs.selector
    status.update(obs.extra)
    return status


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
LIVE_KEYS = frozenset({"metrics", "tokensPerSecondDisplay", "kvCacheUsageDisplay"})
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


Event = tuple[str, str, str]
"""(type, reason, message) of a Kubernetes event."""


def condition_events(previous: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[Event]:
    """Events for condition transitions worth telling: Degraded turning True (or changing reason), Ready,
    and the InferencePool going in or out of sync."""
    before = {c["type"]: c for c in (previous or {}).get("conditions") or []}
    events: list[Event] = []
    for cond in new.get("conditions") or []:
        old = before.get(cond["type"])
        moved = old is None or (old.get("status"), old.get("reason")) != (cond["status"], cond["reason"])
        if not moved:
            continue
        if cond["type"] == DEGRADED and cond["status"] == "True":
            events.append(("Warning", cond["reason"], cond["message"]))
        elif cond["type"] == READY and cond["status"] == "True":
            events.append(("Normal", cond["reason"], cond["message"]))
        elif cond["type"] == INFERENCE_POOL_READY:
            events.append(("Normal" if cond["status"] == "True" else "Warning", cond["reason"], cond["message"]))
    return events
