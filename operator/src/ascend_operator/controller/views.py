"""Typed views of the pods the operator owns, read once from raw Kubernetes objects.

The planner and the status function work on these views, never on raw dicts, so the rules about what a
pod "is" (ready, terminating, unschedulable for lack of NPUs, waiting on the kubelet and why) live in one
place; a service's stored status is read back through its model (`stored_status`).
"""

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ascend_operator.api.constants import (
    ANNOTATION_DRAIN,
    ANNOTATION_DRIFT_BASELINE,
    ANNOTATION_SPEC_HASH,
    ENGINE_CONTAINER,
    KNOWN_NPU_RESOURCES,
    LABEL_REPLICA,
    LABEL_REVISION,
    LWS_GROUP_INDEX_LABEL,
    LWS_WORKER_INDEX_LABEL,
    READINESS_GATE,
)
from ascend_operator.api.status import AscendInferenceServiceStatus
from ascend_operator.contract.mindcluster import pod_chips

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class PodView:
    """What the operator needs to know about one engine pod."""

    name: str
    uid: str
    replica: int | None
    spec_hash: str | None
    phase: str
    ready: bool
    terminating: bool
    node: str | None
    ip: str | None
    created: str | None
    unschedulable: str | None
    """The scheduler's message when the pod cannot be placed, else None."""
    started_at: str | None = None
    """When the pod started running (status.startTime)."""
    gate: tuple[bool, str] | None = None
    """The operator's readiness gate as the pod carries it (ready, reason), None when never written."""
    worker_index: int | None = None
    """Place in a LeaderWorkerSet group (0 = leader); None for a single-node pod."""
    waiting: tuple[str, str] | None = None
    """(reason, message) of the first container that is waiting with a reason (ErrImagePull,
    CrashLoopBackOff, ContainerCreating, ...), as the kubelet reports it."""
    restarts: int = 0
    """Container restarts summed over the pod's containers."""
    engine_restarts: int | None = None
    """The engine container's restart count (None: the kubelet reports no status for it yet)."""
    engine_started_at: str | None = None
    """When the engine container's current run started (state.running.startedAt), None when not running."""
    engine_loaded: bool = False
    """The kubelet reports the engine container `started`: its startup probe (`/health`, answered once the
    weights are loaded) passed for the current run."""
    gate_since: str | None = None
    """When the operator's readiness gate last changed (its lastTransitionTime), None when never written."""
    last_exit: str | None = None
    """How the previous run of the container `waiting` names ended ("Error, exit code 1"), for
    CrashLoopBackOff: the same container's, never a sidecar's beside a waiting engine."""
    engine_last_exit: str | None = None
    """How the engine container's previous run ended, for the EngineRestarted message."""
    drain: Mapping[str, str] | None = None
    """The operator's drain annotation ({"since", "reason", "message"}), None when not draining."""
    drift_baseline: str | None = None
    """The drift baseline annotation as stored (JSON), None when none was written."""
    chips: frozenset[str] = frozenset()
    """The NPUs the device plugin mounted into the pod (its `huawei.com/AscendReal` annotation)."""
    revision: str | None = None
    """The ControllerRevision digest the pod was rendered from (its label), None on older pods."""

    @property
    def leader_or_single(self) -> bool:
        """A pod that serves the API: a single-node pod or a group's leader."""
        return self.worker_index in (None, 0)

    @property
    def lacks_npus(self) -> bool:
        """The scheduler found no node with enough free NPUs."""
        return self.unschedulable is not None and any(
            f"Insufficient {name}" in self.unschedulable for name in KNOWN_NPU_RESOURCES
        )


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def _index(labels: Mapping[str, str], key: str) -> int | None:
    raw = labels.get(key)
    return int(raw) if raw is not None and raw.isdigit() else None


def _replica(labels: Mapping[str, str]) -> int | None:
    """The replica a pod serves: its own label, or the LWS group index of a group's pod."""
    own = _index(labels, LABEL_REPLICA)
    return own if own is not None else _index(labels, LWS_GROUP_INDEX_LABEL)


def _waiting_container(statuses: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first container (init containers first) the kubelet holds waiting with a reason."""
    return next((cs for cs in statuses if ((cs.get("state") or {}).get("waiting") or {}).get("reason")), None)


def _waiting(cs: Mapping[str, Any] | None) -> tuple[str, str] | None:
    if cs is None:
        return None
    waiting = cs["state"]["waiting"]
    return str(waiting["reason"]), str(waiting.get("message") or "")


def _last_exit(cs: Mapping[str, Any] | None) -> str | None:
    """How the container's previous run ended, from its lastState."""
    ended = ((cs or {}).get("lastState") or {}).get("terminated")
    if not ended:
        return None
    return f"{ended.get('reason') or 'Terminated'}, exit code {ended.get('exitCode')}"


def _drain(annotations: Mapping[str, str]) -> Mapping[str, str] | None:
    """The drain annotation, or None when absent or not the operator's JSON (then it is not draining)."""
    raw = annotations.get(ANNOTATION_DRAIN)
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("since"), str):
        return None
    return {k: str(v) for k, v in value.items()}


def pod_view(pod: Mapping[str, Any]) -> PodView:
    """Read a pod object (as the API returns it, camelCase) into a view."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    containers = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    ready = _condition(status, "Ready")
    scheduled = _condition(status, "PodScheduled")
    gate = _condition(status, READINESS_GATE)
    engine = next((cs for cs in containers if cs.get("name") == ENGINE_CONTAINER), None)
    held = _waiting_container(containers)
    unschedulable = None
    if scheduled is not None and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        unschedulable = str(scheduled.get("message") or "Unschedulable")
    return PodView(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        replica=_replica(meta.get("labels") or {}),
        spec_hash=(meta.get("annotations") or {}).get(ANNOTATION_SPEC_HASH),
        phase=status.get("phase") or "Pending",
        ready=ready is not None and ready.get("status") == "True",
        terminating=meta.get("deletionTimestamp") is not None,
        node=(pod.get("spec") or {}).get("nodeName"),
        ip=status.get("podIP"),
        created=meta.get("creationTimestamp"),
        unschedulable=unschedulable,
        started_at=status.get("startTime"),
        gate=(gate.get("status") == "True", str(gate.get("reason") or "")) if gate is not None else None,
        worker_index=_index(meta.get("labels") or {}, LWS_WORKER_INDEX_LABEL),
        waiting=_waiting(held),
        restarts=sum(int(cs.get("restartCount") or 0) for cs in containers),
        engine_restarts=None if engine is None else int(engine.get("restartCount") or 0),
        engine_started_at=None
        if engine is None
        else ((engine.get("state") or {}).get("running") or {}).get("startedAt"),
        gate_since=gate.get("lastTransitionTime") if gate is not None else None,
        engine_loaded=engine is not None and engine.get("started") is True,
        last_exit=_last_exit(held),
        engine_last_exit=_last_exit(engine),
        drain=_drain(meta.get("annotations") or {}),
        drift_baseline=(meta.get("annotations") or {}).get(ANNOTATION_DRIFT_BASELINE),
        chips=pod_chips(meta.get("annotations")),
        revision=(meta.get("labels") or {}).get(LABEL_REVISION),
    )


def stored_status(body: Mapping[str, Any] | None) -> AscendInferenceServiceStatus:
    """A service's stored status read through the model, as the operator wrote it (the API server stored it
    under the schema the model generates). A field that does not validate (hand-edited, or written by an
    operator of another version) is left out with a warning, not the whole status, and of a list only the
    items that do not: the rest still counts."""
    raw = (body or {}).get("status") or {}
    try:
        return AscendInferenceServiceStatus.model_validate(raw)
    except ValidationError:
        name = (body or {}).get("metadata", {}).get("name")
        kept = {}
        for key, value in raw.items():
            items = value if isinstance(value, list) else [value]
            valid = [item for item in items if _valid(key, [item] if isinstance(value, list) else item, name)]
            if valid:
                kept[key] = valid if isinstance(value, list) else valid[0]
        return AscendInferenceServiceStatus.model_validate(kept)


def _valid(key: str, value: Any, service: str | None) -> bool:
    """Whether status.<key> (a list field: one item of it, as a list) validates; a warning names what not."""
    try:
        AscendInferenceServiceStatus.model_validate({key: value})
    except ValidationError as exc:
        log.warning("status.%s of %s left out: %s", key, service, exc)
        return False
    return True
