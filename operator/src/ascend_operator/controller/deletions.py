"""The disruption step: the one place the operator deletes (or drains) an engine pod. I/O only.

Both loops call `disrupt` with their candidates (the reconcile loop: spec changes, scale-down, duplicates;
the health loop: stall, drift, age). Under the service's lock it re-lists the pods, merges the other
loop's latest candidates, asks the pure decision (`ascend_operator.disruption.decide`) and executes it:
- Drain: the drain annotation on the pod (so a restarted operator continues it), then the readiness gate
  False with reason Draining (the Service and InferencePool stop sending new requests);
- Delete: first the roll record (a `Roll` of api/status.py: time, pod, uid, reason, drain result) into
  status.rolls (and, for a health reason, its time into status.healthRolls, the hourly limit's own record),
  written as the status model's merge patch so a misspelt field fails here instead of being pruned by the
  API server, with a resourceVersion
  precondition (409: someone wrote meanwhile; decide again next pass), then the pod with a uid precondition.
  A crash between the two leaves a record whose pod still exists: the next call completes it by uid, so
  the record is never lost and a successor pod (another uid) is never deleted.
  A forced kind (NodeLost: the pod's node stopped reporting) deletes with a grace of 0, a pod already
  terminating included, and, for a group's leader, the group's workers on the lost nodes the same way.
  A group's leader deleted to remove its replica (ScaleDown, TopologyChanged) is removed by shrinking the
  LeaderWorkerSet to the group's index instead (deleting the leader would make LWS recreate the group);
  the last group goes with the set.
"""

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kopf

from ascend_operator.api.constants import ANNOTATION_DRAIN, READINESS_GATE
from ascend_operator.api.reasons import DegradedReason, EventReason, ProgressingReason, VerdictReason
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.api.status import DEGRADED, PROGRESSING, AscendInferenceServiceStatus, Roll
from ascend_operator.clients.resources import LWS, POD, SERVICE_CR, Kube, service_pods
from ascend_operator.controller import crashpoints
from ascend_operator.controller.groups import leaders_seen, recreated_groups
from ascend_operator.controller.operator_metrics import record_refusal, record_roll
from ascend_operator.controller.service_state import EventSink, ServiceMemory
from ascend_operator.controller.status import ConditionRecord, merge_patch
from ascend_operator.controller.timestamps import epoch, iso
from ascend_operator.controller.views import PodView, pod_view
from ascend_operator.disruption import (
    FORCE_REASONS,
    HEALTH_REASONS,
    HUNG_GRACE_SECONDS,
    HUNG_REASONS,
    POD_GONE,
    REMOVAL_REASONS,
    Candidate,
    Decision,
    Delete,
    DisruptionConfig,
    Drain,
    DrainResult,
    PodState,
    RollReason,
    decide,
)
from ascend_operator.disruption.decide import HOUR
from ascend_operator.render.lws import ANNOTATION_LEADERS, LWS_SUFFIX

KEEP_ROLLS = 20
#: status.healthRolls' bound: spec.health.rolls.maxPerHour is at most 60.
HEALTH_ROLLS_KEPT = 60
log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Site:
    """Where a decision acts: the service and the I/O it may do."""

    kube: Kube
    events: EventSink
    namespace: str
    service: str
    clock: Callable[[], float]


def _reason(raw: str | None) -> RollReason | None:
    try:
        return RollReason(raw) if raw else None
    except ValueError:
        return None


def pod_states(views: Sequence[PodView], memory: ServiceMemory) -> list[PodState]:
    """The decision's view of each serving pod, with the health loop's last figures."""
    states = []
    for p in views:
        drain = p.drain or {}
        flight = memory.in_flight.get(p.uid, 0)
        states.append(
            PodState(
                name=p.name,
                uid=p.uid,
                ready=p.ready and p.leader_or_single,  # a worker serves through its leader, never alone
                terminating=p.terminating,
                started_at=epoch(p.started_at),
                served=p.uid in memory.served,
                draining_since=epoch(drain.get("since")) if p.drain else None,
                drain_reason=_reason(drain.get("reason")),
                drain_message=drain.get("message", ""),
                in_flight=flight if p.uid in memory.in_flight else None,
                in_flight_at=memory.scraped_at if p.uid in memory.in_flight else None,
                arrived=memory.arrived.get(p.uid),
                unanswered_since=memory.unanswered_since.get(p.uid),
            )
        )
    return states


def stored_rolls(status: Mapping[str, Any]) -> list[Roll]:
    """status.rolls as `Roll` records. The API server stored them under the schema `Roll` generates, so
    each validates; one that does not (a hand-edited status) is left out, with a warning."""
    rolls = []
    for raw in status.get("rolls") or []:
        try:
            rolls.append(Roll.model_validate(raw))
        except ValueError as exc:  # pydantic's ValidationError is one
            log.warning("status.rolls entry %r left out: %s", raw, exc)
    return rolls


def health_history(status: Mapping[str, Any], rolls: Sequence[Roll]) -> list[float]:
    """Times of the health rolls (stall, drift, age) that spec.health.rolls limits: the limit's own record
    (status.healthRolls), plus any health roll status.rolls still shows (a record from before the field)."""
    health = {r.value for r in HEALTH_REASONS}
    own = list(status.get("healthRolls") or [])
    stamps = [*own, *(r.time for r in rolls if r.reason in health and r.time not in own)]
    return sorted(t for s in stamps if (t := epoch(s)) is not None)


def kept_health_rolls(status: Mapping[str, Any], *, now: float) -> list[str]:
    """status.healthRolls without the times an hour old (the limit counts no further back)."""
    times = [(t, s) for s in status.get("healthRolls") or [] if (t := epoch(s)) is not None]
    return [s for t, s in sorted(times) if now - t < HOUR][-HEALTH_ROLLS_KEPT:]


def deferred(decision: Decision) -> list[ConditionRecord]:
    """Degraded/RollDeferred for a health roll a rule refused: what was found, on which pod, which rule."""
    return [
        ConditionRecord(
            DEGRADED, "True", DegradedReason.ROLL_DEFERRED, f"{h.candidate.reason} on {h.candidate.pod}: {h.message}"
        )
        for h in decision.held
        if h.refused and h.candidate.reason in HEALTH_REASONS and h.rule != POD_GONE
    ]


def switching(decision: Decision) -> list[ConditionRecord]:
    """Progressing/TopologySwitchWaiting while a switch between one node and several per replica waits for
    capacity: what the other shape needs, and what the budget waits for."""
    waits = [h for h in decision.held if h.refused and h.candidate.reason is RollReason.TOPOLOGY_CHANGED]
    if not waits:
        return []
    first = waits[0]
    message = f"{first.candidate.message}; {first.message}"
    return [ConditionRecord(PROGRESSING, "True", ProgressingReason.TOPOLOGY_SWITCH_WAITING, message)]


async def _history(site: Site, memory: ServiceMemory, candidates: Sequence[Candidate]) -> list[float]:
    """The health roll times, read from the stored status only when a health candidate needs them."""
    if not any(c.reason in HEALTH_REASONS for c in candidates):
        return []
    current = await site.kube.get(SERVICE_CR, site.namespace, site.service)
    return health_history((current or {}).get("status") or {}, memory.rolls)


async def _serving(site: Site, memory: ServiceMemory) -> list[PodView]:
    """Single-node pods and group leaders (a group is judged and deleted through its leader), and the groups'
    workers on lost nodes or terminating, which never count as serving (`pod_states`) and are deleted by
    themselves only when left on a lost node (NodeLost), so that their group's successor can take the name."""
    pods = [pod_view(p) for p in await service_pods(site.kube, site.namespace, site.service)]
    return [v for v in pods if v.leader_or_single or v.terminating or v.node in memory.lost_nodes]


async def _remove(site: Site, pod: PodView | None, *, name: str, uid: str, reason: RollReason) -> bool:
    """Delete the pod, or remove its group when it leads one and the reason removes the replica."""
    if pod is not None and pod.worker_index == 0 and pod.replica is not None and reason in REMOVAL_REASONS:
        lws = f"{site.service}{LWS_SUFFIX}"
        if pod.replica == 0:
            return await site.kube.delete(LWS, site.namespace, lws, foreground=True)
        await site.kube.patch(LWS, site.namespace, lws, {"spec": {"replicas": pod.replica}})
        return True
    if reason in FORCE_REASONS:  # a lost node: no kubelet will confirm, so the API server removes it at once
        return await site.kube.delete(POD, site.namespace, name, uid=uid, grace_seconds=0)
    grace = HUNG_GRACE_SECONDS if reason in HUNG_REASONS else None  # None: the pod's own grace period
    return await site.kube.delete(POD, site.namespace, name, uid=uid, grace_seconds=grace)


async def _force_members(site: Site, memory: ServiceMemory, pod: PodView | None) -> None:
    """The workers of a group forced out with its leader that sit on a lost node: LeaderWorkerSet gives a
    recreated group the same pod names, so a worker left Terminating there would hold its successor's name
    for as long as the node stays silent. Workers on live nodes go with the group as usual."""
    if pod is None or pod.worker_index != 0 or not memory.lost_nodes:
        return
    for raw in await service_pods(site.kube, site.namespace, site.service):
        member = pod_view(raw)
        if member.replica == pod.replica and member.worker_index not in (None, 0) and member.node in memory.lost_nodes:
            await site.kube.delete(POD, site.namespace, member.name, uid=member.uid, grace_seconds=0)


async def _complete_recorded(site: Site, memory: ServiceMemory, views: Sequence[PodView]) -> bool:
    """Delete the pods of recorded rolls that still exist under the recorded uid (a crash came between the
    record and the delete). True when one was found."""
    live = {p.uid: p for p in views}
    found = False
    for record in memory.rolls:
        pod = live.get(record.uid)
        reason = _reason(record.reason) or RollReason.STALLED
        if pod is None or (pod.terminating and reason not in FORCE_REASONS):
            continue
        found = True
        if await _remove(site, pod, name=pod.name, uid=pod.uid, reason=reason):
            site.events(
                "Normal", EventReason.ROLL_COMPLETED, f"deleted pod {pod.name} of the recorded roll {record.time}"
            )
    return found


async def _drain(site: Site, action: Drain) -> None:
    now = site.clock()
    note = json.dumps({"since": iso(now), "reason": action.reason.value, "message": action.message[:500]})
    annotate = {"metadata": {"annotations": {ANNOTATION_DRAIN: note}}}
    if await site.kube.patch(POD, site.namespace, action.pod, annotate) is None:
        return
    condition = {
        "type": READINESS_GATE,
        "status": "False",
        "reason": VerdictReason.DRAINING.value,
        "message": f"draining before deletion ({action.reason.value})",
        "lastTransitionTime": iso(now),
    }
    try:
        await site.kube.patch(POD, site.namespace, action.pod, {"status": {"conditions": [condition]}}, status=True)
    except (kopf.TemporaryError, kopf.PermanentError) as exc:  # the health loop writes it from the annotation
        log.warning("drain gate of pod %s/%s not written: %s", site.namespace, action.pod, exc)
    site.events(
        "Normal", EventReason.DRAINING, f"draining pod {action.pod} before deleting it, reason {action.reason.value}"
    )
    log.info("%s/%s: draining pod %s, reason %s: %s", site.namespace, site.service, action.pod,
             action.reason.value, action.message)  # fmt: skip


def _record(site: Site, *, pod: str, uid: str, reason: RollReason, message: str, drain: DrainResult) -> Roll:
    return Roll(
        time=iso(site.clock()), pod=pod, uid=uid, reason=reason.value, message=message[:1000], drain=drain.value
    )


async def _append(site: Site, memory: ServiceMemory, records: Sequence[Roll], *, health: bool) -> bool:
    """Append roll records to status.rolls (and, for a health roll, its time to status.healthRolls) under a
    resourceVersion precondition; False when the object moved on meanwhile (nothing written)."""
    current = await site.kube.get(SERVICE_CR, site.namespace, site.service)
    if current is None:
        return False
    status = current.get("status") or {}
    stored = stored_rolls(status)
    rolls = [*stored, *records][-KEEP_ROLLS:]
    fields: dict[str, Any] = {"rolls": rolls, "last_roll": records[-1]}
    if health:
        times = [*kept_health_rolls(status, now=site.clock()), *(r.time for r in records)]
        fields["health_rolls"] = times[-HEALTH_ROLLS_KEPT:]
    written = merge_patch(AscendInferenceServiceStatus(**fields))  # only these fields: the rest is not ours here
    version = str((current.get("metadata") or {}).get("resourceVersion") or "")
    stored_at = await site.kube.patch(
        SERVICE_CR, site.namespace, site.service, {"status": written}, status=True, resource_version=version
    )
    if stored_at is None:
        memory.rolls = stored  # moved on meanwhile: decide again on the next pass, from what is stored
        return False
    memory.rolls = rolls
    return True


async def _delete(site: Site, memory: ServiceMemory, action: Delete, views: Sequence[PodView]) -> None:
    record = _record(
        site, pod=action.pod, uid=action.uid, reason=action.reason, message=action.message, drain=action.drain
    )
    if not await _append(site, memory, [record], health=action.reason in HEALTH_REASONS):
        return
    crashpoints.after_roll_record()
    pod = next((p for p in views if p.uid == action.uid), None)
    if not await _remove(site, pod, name=action.pod, uid=action.uid, reason=action.reason):
        return
    if action.reason in FORCE_REASONS:
        await _force_members(site, memory, pod)
    record_roll(site.namespace, site.service, action.reason)
    # the operator's log keeps every deletion with its reason too: events expire (1 h by default), and a
    # pod that went under load is read from the log afterwards (a CI run's real engine, 2026-12-05)
    log.info("%s/%s: deleted pod %s, reason %s (%s): %s", site.namespace, site.service, action.pod,
             action.reason.value, action.drain.value, action.message)  # fmt: skip
    if action.reason in HEALTH_REASONS:
        site.events(
            "Warning",
            EventReason.ROLLED,
            f"recreating pod {action.pod}, reason {action.reason.value}: {action.message}",
        )
    else:
        site.events("Normal", action.reason, f"deleted pod {action.pod}: {action.reason.value} ({action.drain})")


async def observe_groups(site: Site, memory: ServiceMemory, lws: Mapping[str, Any], pods: Sequence[PodView]) -> None:
    """Record the groups LeaderWorkerSet recreated on its own in status.rolls, then keep the leaders seen in
    the set's annotation (it survives an operator restart; controller/groups.py compares the two)."""
    annotations = (lws.get("metadata") or {}).get("annotations") or {}
    try:
        seen = json.loads(annotations.get(ANNOTATION_LEADERS) or "{}")
    except ValueError:
        seen = {}
    seen = {
        str(k): v
        for k, v in (seen.items() if isinstance(seen, dict) else ())
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v)
    }
    async with memory.lock:
        recorded = {r.uid for r in memory.rolls}
        found = recreated_groups(seen=seen, pods=pods, recorded=recorded)
        records = [
            _record(site, pod=g.pod, uid=g.uid, reason=g.reason, message=g.message, drain=DrainResult.NOT_DRAINED)
            for g in found
        ]
        if records and not await _append(site, memory, records, health=False):
            return  # the next pass sees the same groups again
    for group in found:
        record_roll(site.namespace, site.service, group.reason)
        site.events("Warning", group.reason, f"{group.message}: its leader is now {group.pod}")
    size = (lws.get("spec") or {}).get("replicas")
    now = leaders_seen(pods, before=seen, size=size if isinstance(size, int) else 0)
    if now != seen:
        patch = {"metadata": {"annotations": {ANNOTATION_LEADERS: json.dumps(now, sort_keys=True)}}}
        await site.kube.patch(LWS, site.namespace, f"{site.service}{LWS_SUFFIX}", patch)


async def disrupt(
    site: Site, memory: ServiceMemory, spec: AscendInferenceServiceSpec, *, source: str, candidates: list[Candidate]
) -> Decision:
    """Record this loop's candidates, decide once over everyone's, and act on the decision."""
    async with memory.lock:
        memory.candidates[source] = candidates
        views = await _serving(site, memory)
        if await _complete_recorded(site, memory, views):
            return Decision(action=None)
        candidates = [c for cands in memory.candidates.values() for c in cands]
        decision = decide(
            candidates=candidates,
            pods=pod_states(views, memory),
            history=await _history(site, memory, candidates),
            now=site.clock(),
            cfg=DisruptionConfig(
                replicas=spec.replicas,
                max_unavailable=spec.rollout.max_unavailable,
                drain_seconds=spec.rollout.drain_seconds,
                settle_seconds=spec.health.scrape_interval_seconds,
                health=spec.health,
            ),
        )
        if source == "health":  # counted once per health pass, as before
            for held in decision.held:
                if held.refused and held.candidate.reason in HEALTH_REASONS:
                    record_refusal(site.namespace, site.service, held.rule)
        memory.overrides = [*deferred(decision), *switching(decision)]
        if isinstance(decision.action, Drain):
            await _drain(site, decision.action)
        elif isinstance(decision.action, Delete):
            await _delete(site, memory, decision.action, views)
        return decision
