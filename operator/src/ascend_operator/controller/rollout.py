"""The reconcile side of revisions and judged rollouts: which revision the pods should run, which pod may
go to make the one judged replica, and status.currentRevision / updateRevision / revisions / rollout.

How a spec change goes with spec.rollout.analysis (without it: Progressing at once, every stale pod is a
`SpecChanged` candidate as before):

1. Analyzing: the pods are judged against the *current* revision, so none is stale; one pod of it (the
   lowest replica) is a `SpecChanged` candidate, once, when every replica is there and none is going, and
   its successor is rendered from the updated revision. No second pod is ever created on that revision
   while it is judged (`canary` is offered only while none exists). The health loop judges it
   (controller/analysis.py) and leaves a verdict in memory.
2. Passed: Progressing, the rest go through the budget as any spec change. Failed: RolledBack, the pods
   are judged against the current revision again, so the judged pod is the one stale pod, a `RolledBack`
   candidate (drained); status.rollout keeps the signal and both values, and nothing more happens until the
   spec renders another revision (a new change, or `aisctl rollout undo` writing the current one back).
3. Complete: every replica runs the updated revision, which becomes the current one.

Multi-node services (LeaderWorkerSet rolls its groups itself) and a P/D split's parent (no engines of its
own; its role services have their own revisions) have none of this.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ascend_operator.api.reasons import EventReason, RolloutSignal
from ascend_operator.api.revision import RolloutPhase
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.api.status import ROLLOUT_HEALTHY, AscendInferenceServiceStatus
from ascend_operator.clients.resources import Kube
from ascend_operator.controller.revisions import ensure_revision, list_revisions, revision_digest, revision_name
from ascend_operator.controller.rollout_memory import Judging
from ascend_operator.controller.service_state import EventSink, ServiceMemory
from ascend_operator.controller.status import ConditionRecord
from ascend_operator.controller.views import PodView
from ascend_operator.disruption import Candidate, RollReason
from ascend_operator.render.desired import Desired, why_no_revisions
from ascend_operator.rollout_analysis import Outcome

#: The condition that says how the last spec change went (True: it goes on or is done; False: rolled back).
CONDITION = ROLLOUT_HEALTHY


@dataclass(kw_only=True)
class Rollout:
    """What this pass's pod actions follow."""

    update: str
    current: str
    target: Desired
    """What the pods are judged against and replacements are rendered from."""
    canary: Desired | None = None
    """The updated revision, for the one judged pod while none exists."""
    phase: RolloutPhase | None = None
    record: dict[str, Any] | None = None
    condition: ConditionRecord | None = None
    extra: AscendInferenceServiceStatus = field(default_factory=AscendInferenceServiceStatus)
    """The status fields of the revisions and the last rollout."""
    raw_spec: Mapping[str, Any] = field(default_factory=dict)
    """The spec as written, what the updated revision stores."""

    def candidates(self, found: Sequence[Candidate], pods: Sequence[PodView], *, replicas: int) -> list[Candidate]:
        """The plan's candidates as this phase allows: the judged pod is kept while Analyzing and is a
        `RolledBack` candidate once rolled back; while Analyzing, one pod of the current revision makes way
        for the judged one."""
        by_uid = {p.uid: p for p in pods}
        out: list[Candidate] = []
        for c in found:
            on_update = (p := by_uid.get(c.uid)) is not None and p.revision == self.update
            if c.reason is RollReason.SPEC_CHANGED and on_update and self.phase is RolloutPhase.ANALYZING:
                continue
            if c.reason is RollReason.SPEC_CHANGED and on_update and self.phase is RolloutPhase.ROLLED_BACK:
                why = f"rolled back to revision {self.current}: {(self.record or {}).get('message', '')}"
                c = Candidate(pod=c.pod, uid=c.uid, reason=RollReason.ROLLED_BACK, message=why)
            out.append(c)
        if self.phase is RolloutPhase.ANALYZING and not out:
            out += self._make_way(pods, replicas=replicas)
        return out

    def _make_way(self, pods: Sequence[PodView], *, replicas: int) -> list[Candidate]:
        if any(p.terminating or p.revision == self.update for p in pods):
            return []  # one pod at a time, and never a second on the judged revision
        serving = sorted(pods, key=lambda p: p.replica or 0)
        if len(serving) < replicas or not serving:
            return []
        first = serving[0]
        why = f"{RollReason.SPEC_CHANGED.value}: first replica on revision {self.update}, judged before the rest"
        return [Candidate(pod=first.name, uid=first.uid, reason=RollReason.SPEC_CHANGED, message=why)]

    def creates(self, pods: Sequence[PodView]) -> Desired | None:
        """The updated revision for the next create, while Analyzing and no pod runs it."""
        noted = (self.record or {}).get("canary")
        if self.canary is not None and not noted and not any(p.revision == self.update for p in pods):
            return self.canary
        return None


def _current(previous: AscendInferenceServiceStatus, pods: Sequence[PodView], update: str) -> str:
    stored = previous.current_revision
    if stored:
        return stored.rsplit("-", 1)[-1]
    labelled = Counter(p.revision for p in pods if p.revision and not p.terminating)
    return labelled.most_common(1)[0][0] if labelled else update


def _spec_of(raw: Mapping[str, Any], replicas: int) -> AscendInferenceServiceSpec | None:
    try:
        spec = AscendInferenceServiceSpec.model_validate(raw)
    except ValueError:
        return None
    return spec.model_copy(update={"replicas": replicas})


def _counts(service: str, pods: Sequence[PodView]) -> list[dict[str, Any]]:
    counts: dict[str, list[int]] = {}
    for p in pods:
        if p.revision and not p.terminating:
            c = counts.setdefault(p.revision, [0, 0])
            c[0] += 1
            c[1] += int(p.ready)
    return [
        {"revision": revision_name(service, d), "replicas": n, "readyReplicas": r}
        for d, (n, r) in sorted(counts.items())
    ]


def _conclude(record: dict[str, Any], memory: ServiceMemory, events: EventSink, now: str) -> RolloutPhase | None:
    """Turn the health loop's verdict on the judged revision into the record; the new phase, or None."""
    done = memory.rollout.concluded
    if done is None or done.revision != record["revision"]:
        return None
    v = done.verdict
    record.update(
        comparedWith=done.compared_with,
        canary=done.canary,
        signal=v.signal,
        canaryValue=None if v.canary is None else round(v.canary, 4),
        baselineValue=None if v.baseline is None else round(v.baseline, 4),
        message=v.message,
    )
    if v.outcome is Outcome.FAILED:
        record.update(phase=RolloutPhase.ROLLED_BACK.value, finishedAt=now)
        said = (
            f"revision {record['revision']} rolled back after pod {done.canary}: {v.message} "
            f"(compared with the previous revision's {done.compared_with})"
        )
        events("Warning", RollReason.ROLLED_BACK, said)
        return RolloutPhase.ROLLED_BACK
    record["phase"] = RolloutPhase.PROGRESSING.value
    events("Normal", EventReason.ANALYSIS_PASSED, f"revision {record['revision']} on pod {done.canary}: {v.message}")
    return RolloutPhase.PROGRESSING


def _judged_pod(
    record: dict[str, Any], pods: Sequence[PodView], memory: ServiceMemory, events: EventSink, now: str
) -> RolloutPhase | None:
    """Note the judged pod once it exists; when it is gone before a verdict (a stall or fault roll, a crash,
    a deletion by hand), the analysis failed: its successor and every other replica stay on the current
    revision (rolled back), never a second pod on the judged one."""
    on_update = [p for p in pods if p.revision == record["revision"]]
    if not record.get("canary"):
        if live := [p for p in on_update if not p.terminating]:
            record.update(canary=live[0].name, canaryUid=live[0].uid)
        return None
    if on_update:
        return None
    roll = next((r for r in reversed(memory.rolls) if r.uid and r.uid == record.get("canaryUid")), None)
    signal = roll.reason if roll is not None else RolloutSignal.CANARY_GONE
    why = f"pod {record['canary']} went before the analysis ended" + (f": {roll.message}" if roll else "")
    record.update(phase=RolloutPhase.ROLLED_BACK.value, finishedAt=now, signal=signal, message=why)
    events("Warning", RollReason.ROLLED_BACK, f"revision {record['revision']} rolled back: {why}")
    return RolloutPhase.ROLLED_BACK


def _condition(record: Mapping[str, Any] | None) -> ConditionRecord | None:
    if record is None:
        return None
    phase = RolloutPhase(record["phase"])
    if phase is RolloutPhase.ROLLED_BACK:
        why = f"revision {record['revision']} rolled back: {record.get('message', '')}"
        return ConditionRecord(CONDITION, "False", phase, why)
    return ConditionRecord(CONDITION, "True", phase, f"revision {record['revision']}")


async def plan_rollout(
    kube: Kube,
    events: EventSink,
    desired: Desired,
    *,
    raw_spec: Mapping[str, Any],
    pods: Sequence[PodView],
    previous: AscendInferenceServiceStatus,
    memory: ServiceMemory,
    now: str,
) -> Rollout | None:
    """This pass's rollout; None for multi-node and P/D parents. The revisions are read only while a change
    rolls out; the spec's own revision is made after the pods (`keep_revision`): a new service's pods wait
    for no other API call."""
    spec, owner, rm = desired.engines, desired.owner, memory.rollout
    if why_no_revisions(desired.spec) is not None:
        rm.judging = None
        return None
    update = revision_digest(spec)
    current = _current(previous, pods, update)
    if update != current and current not in rm.revisions:  # read only while a change rolls out
        rm.revisions.clear()
        rm.revisions.update(await list_revisions(kube, owner))
    # the stored record (read through the model), worked on as the dict it is written back as
    stored = previous.rollout
    record = stored.model_dump(by_alias=True, mode="json", exclude_unset=True) if stored is not None else None
    kept = [p for p in pods if not p.terminating]
    old = rm.revisions.get(current) if update != current else None  # parsed only while a change rolls out
    old_spec = _spec_of(old.spec, spec.replicas) if old is not None else None
    old_desired = Desired(spec=old_spec, owner=owner, placement=desired.placement) if old_spec else None
    plan = Rollout(update=update, current=current, target=desired, raw_spec=raw_spec)
    analysis = spec.rollout.analysis
    if update != current:
        if record is None or record.get("revision") != update:
            first = (
                RolloutPhase.ANALYZING if analysis is not None and old_desired is not None else RolloutPhase.PROGRESSING
            )
            record = {"phase": first.value, "revision": update, "previous": current, "startedAt": now}
            if rm.concluded is not None and rm.concluded.revision == update:
                rm.concluded = None  # the same spec again: judged again, not by an earlier verdict
            rm.window = None
        phase = RolloutPhase(record["phase"])
        if phase is RolloutPhase.ANALYZING and (analysis is None or old_desired is None):
            phase = RolloutPhase.PROGRESSING
            record["phase"] = phase.value
        if phase is RolloutPhase.ANALYZING:
            phase = _judged_pod(record, pods, memory, events, now) or _conclude(record, memory, events, now) or phase
        plan.phase = phase
        if phase in (RolloutPhase.ANALYZING, RolloutPhase.ROLLED_BACK) and old_desired is not None:
            plan.target = old_desired
        if phase is RolloutPhase.ANALYZING and analysis is not None:
            plan.canary = desired
            rm.judging = Judging(update=update, current=current, analysis=analysis)
        else:
            rm.judging = None
        done = len(kept) == spec.replicas and all(p.revision == update and p.ready for p in kept)
        if phase is RolloutPhase.PROGRESSING and done:
            record.update(phase=RolloutPhase.COMPLETE.value, finishedAt=now)
            events(
                "Normal",
                EventReason.ROLLOUT_COMPLETE,
                f"every replica runs revision {revision_name(owner.name, update)}",
            )
            plan.phase, current = RolloutPhase.COMPLETE, update
    else:
        rm.judging = None
        unfinished = (RolloutPhase.ANALYZING.value, RolloutPhase.PROGRESSING.value)
        if record is not None and record.get("revision") == update and record.get("phase") in unfinished:
            record.update(phase=RolloutPhase.COMPLETE.value, finishedAt=now)
    rm.current = current
    plan.record = record
    plan.condition = _condition(record)
    plan.extra = AscendInferenceServiceStatus.model_validate(  # the record is the stored one, kept as a dict
        {
            "currentRevision": revision_name(owner.name, current),
            "updateRevision": revision_name(owner.name, update),
            "revisions": _counts(owner.name, pods),
            **({"rollout": record} if record is not None else {}),
        }
    )
    return plan


async def keep_revision(kube: Kube, desired: Desired, plan: Rollout, memory: ServiceMemory) -> None:
    """The ControllerRevision of the spec (made once, then known from memory), the history pruned."""
    await ensure_revision(
        kube,
        desired.owner,
        memory.rollout.revisions,
        raw_spec=plan.raw_spec,
        digest=plan.update,
        keep={plan.current},
        limit=desired.engines.rollout.revision_history_limit,
    )
