"""spec.autoscaling in the health loop: gather the signals, ask the pure decision, write spec.replicas.

Why here and not in a loop of its own: the health pass already scraped every engine (queue, KV, TTFT
histograms) and judged every pod (Ready, loading, Pending for NPUs), so the decision costs no extra
request to an engine. The decision itself is `ascend_operator.autoscale` (pure, table-tested); this module
only reads what it needs, keeps the window between passes in the service's memory and applies the answer
by patching spec.replicas, the field the scale subresource (and an HPA) writes. So the reconcile loop
creates a replica and a scale-down goes through the one disruption budget and drain, the least busy replica
first (controller/plan.py, RollReason.SCALE_DOWN), exactly as for a person or an HPA scaling.

An HPA whose scaleTargetRef names the service is listed each pass: with one, the operator writes nothing
(status and the Autoscaling condition name the HPA). Every decision goes to status.autoscaling and the
operator's metrics; a change of spec.replicas and each new reason to hold are events.

A pool of a P/D split (spec.pdRole) decides on its own side's signals but writes no spec.replicas: its
parent keeps the two pools within the user's ratio and writes both (controller/disaggregation.py), so the pool only
publishes its decision in status.autoscaling, at once when it changes (the parent's loop wakes on it). The
parent itself has no engines and no decision of its own.
"""

from collections.abc import Mapping, Sequence

from ascend_operator.api.autoscaling import AutoscalingSpec, AutoscalingStatus, ScaleReason
from ascend_operator.api.constants import GROUP, KIND
from ascend_operator.api.reasons import AutoscalingReason
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.api.status import AUTOSCALING, LiveStatus
from ascend_operator.autoscale import (
    ScaleHistory,
    Signals,
    decide,
    mean_prompt_tokens,
    observe,
    tpot_quantile,
    ttft_quantile,
    wanted,
)
from ascend_operator.clients.resources import HPA, SERVICE_CR
from ascend_operator.controller.deletions import Site
from ascend_operator.controller.operator_metrics import publish_autoscaling, record_scale
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.controller.status import ConditionRecord, merge_patch, overlay, without
from ascend_operator.controller.timestamps import epoch, iso
from ascend_operator.controller.views import PodView
from ascend_operator.health.samples import EngineSample

#: The status condition the autoscaler sets: True while it decides spec.replicas, False while it holds
#: for a reason the user should act on (another autoscaler, no NPUs for another replica, no signal).
CONDITION = AUTOSCALING
#: Seconds the service's body may take to show the spec.replicas the autoscaler wrote (a watch event).
SPEC_CATCH_UP_SECONDS = 15.0
#: Reasons to hold that the condition says (False), each with a message that does not move with the load:
#: the condition is written as soon as it changes, the figures only every status interval.
_HOLDS = {
    ScaleReason.NO_CAPACITY: "a replica is Pending: no node has the NPUs for another, so no more are asked",
    ScaleReason.NO_SIGNAL: "no engine answers its /metrics: nothing to scale on",
    ScaleReason.NOT_READY: "a scale-down waits until the replicas it keeps are Ready",
}


async def other_autoscaler(site: Site) -> str | None:
    """The first HPA in the namespace whose scaleTargetRef is this service, by name."""
    for hpa in await site.kube.list(HPA, site.namespace):
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        group = str(ref.get("apiVersion", "")).split("/")[0]
        if ref.get("kind") == KIND and ref.get("name") == site.service and group in ("", GROUP):
            return str(hpa["metadata"]["name"])
    return None


def signals(
    spec: AscendInferenceServiceSpec,
    *,
    views: Sequence[PodView],
    ready: set[str],
    samples: Mapping[str, EngineSample | None],
    histories: Sequence[Sequence[EngineSample]],
    served: set[str],
    now: float,
    wall: float,
    hpa: str | None,
) -> Signals:
    """One pass's signals: `views` are the service's serving pods (leaders), `ready` the uids judged Ready,
    `samples` this pass's scrapes by uid, `histories` every live pod's recent scrapes (for TTFT p90),
    `served` the uids that were ever Ready; `now` monotonic, `wall` epoch seconds. Loading is the one
    startup-grace rule (api/health.py): never Ready and started less than startupGraceSeconds ago."""
    current = [p for p in views if not p.terminating]
    answered = [s for s in samples.values() if s is not None]
    ready_samples = [s for uid, s in samples.items() if s is not None and uid in ready]
    role = None if spec.pd_role is None else spec.pd_role.role.value
    waiting = sum(s.waiting for s in answered)
    prompt = mean_prompt_tokens(histories, now=now) if role == "prefill" else None
    return Signals(
        replicas=spec.replicas,
        ready=sum(p.uid in ready for p in current),
        loading=sum(
            p.uid not in ready
            and not p.lacks_npus
            and spec.health.in_startup_grace(epoch(p.started_at), served=p.uid in served, now=wall)
            for p in current
        ),
        unplaceable=sum(p.lacks_npus for p in current),
        answering=len(answered),
        running=sum(s.running for s in answered),
        waiting=waiting,
        slots=spec.engine.max_num_seqs * spec.parallelism.data,
        kv_usage=max((s.kv_usage for s in ready_samples), default=None),
        ttft_p90=ttft_quantile(histories, now=now),
        other_autoscaler=hpa,
        role=role,
        # a prefill queue of unknown length (nothing prefilled in the window yet) counts one batch a request
        prompt_backlog=None if role != "prefill" else waiting * (prompt or spec.engine.max_num_batched_tokens),
        tpot_p90=tpot_quantile(histories, now=now) if role == "decode" else None,
    )


def _status(
    s: Signals, spec: AutoscalingSpec, desired: int, reason: ScaleReason, message: str, last: str | None
) -> AutoscalingStatus:
    answered = s.answering > 0
    return AutoscalingStatus(
        desired_replicas=desired,
        current_replicas=s.replicas,
        ready_replicas=s.ready,
        loading_replicas=s.loading,
        wanted_replicas=wanted(s, spec)[0] if answered else None,
        waiting_requests=s.waiting if answered else None,
        running_requests=s.running if answered else None,
        slots_per_replica=s.slots,
        kv_cache_usage=None if s.kv_usage is None else round(s.kv_usage, 4),
        ttft_p90_seconds=None if s.ttft_p90 is None else round(s.ttft_p90, 4),
        queued_prompt_tokens=None if s.prompt_backlog is None else round(s.prompt_backlog),
        tpot_p90_seconds=None if s.tpot_p90 is None else round(s.tpot_p90, 4),
        reason=reason,
        message=message,
        last_scale_time=last,
    )


def forget(site: Site, memory: ServiceMemory) -> None:
    """spec.autoscaling is unset: no state, no status, no series, no condition."""
    memory.autoscale = None
    memory.live = without(memory.live, "autoscaling")
    memory.autoscale_condition = None
    publish_autoscaling(site.namespace, site.service, None)


async def autoscale(
    site: Site, memory: ServiceMemory, spec: AscendInferenceServiceSpec, s: Signals, *, now: float
) -> None:
    """Decide and apply one pass (`now`: the monotonic clock of the window)."""
    auto = spec.autoscaling
    if auto is None or spec.disaggregation is not None:  # a P/D parent's pools decide (controller/disaggregation.py)
        forget(site, memory)
        return
    state = memory.autoscale or ScaleHistory()
    state = observe(state, s, auto, now=now)
    if spec.pd_role is not None:
        await _propose(site, memory, auto, s, state, now=now)
        return
    d = decide(s, state, auto, now)
    # the service's body reaches this loop a moment after the patch: the same answer is not written (nor
    # announced) again meanwhile, but it is once that moment is long past (someone wrote spec.replicas back)
    asked, last = memory.autoscale_asked, state.last_scale
    in_flight = asked is not None and s.replicas != asked and last is not None and now - last < SPEC_CATCH_UP_SECONDS
    if d.desired != s.replicas and not (in_flight and d.desired == asked):
        written = await site.kube.patch(SERVICE_CR, site.namespace, site.service, {"spec": {"replicas": d.desired}})
        if written is not None:
            state = ScaleHistory(state.wants, last_scale=now, scaled_down=d.desired < s.replicas)
            memory.autoscale_asked = d.desired
            memory.autoscale_scaled_at = iso(site.clock())
            record_scale(site.namespace, site.service, up=d.desired > s.replicas)
            site.events("Normal", d.reason, d.message)
    elif (d.reason in _HOLDS or d.reason is ScaleReason.OTHER_AUTOSCALER) and d.reason.value != memory.autoscale_reason:
        site.events("Warning", d.reason, d.message)
    memory.autoscale, memory.autoscale_reason = state, d.reason.value
    status = _status(s, auto, d.desired, d.reason, d.message, memory.autoscale_scaled_at)
    memory.live = overlay(memory.live, LiveStatus(autoscaling=_known(status)))
    memory.autoscale_condition = _condition(d.reason, d.message, auto)
    publish_autoscaling(site.namespace, site.service, status, bounds=(auto.min_replicas, auto.max_replicas))


async def _propose(
    site: Site, memory: ServiceMemory, auto: AutoscalingSpec, s: Signals, state: ScaleHistory, *, now: float
) -> None:
    """A P/D pool: decide, publish the decision (status at once when it changes), write no spec.replicas.
    The pool's last scale is when its spec.replicas (the parent's write) last moved."""
    if memory.autoscale_seen is not None and s.replicas != memory.autoscale_seen:
        state = ScaleHistory(state.wants, last_scale=now, scaled_down=s.replicas < memory.autoscale_seen)
        memory.autoscale_scaled_at = iso(site.clock())
    memory.autoscale_seen = s.replicas
    d = decide(s, state, auto, now)
    if (d.reason in _HOLDS or d.reason is ScaleReason.OTHER_AUTOSCALER) and d.reason.value != memory.autoscale_reason:
        site.events("Warning", d.reason, d.message)
    memory.autoscale, memory.autoscale_reason = state, d.reason.value
    status = _status(s, auto, d.desired, d.reason, d.message, memory.autoscale_scaled_at)
    memory.live = overlay(memory.live, LiveStatus(autoscaling=_known(status)))
    dumped = merge_patch(_known(status))
    memory.autoscale_condition = _condition(d.reason, d.message, auto)
    publish_autoscaling(site.namespace, site.service, status, bounds=(auto.min_replicas, auto.max_replicas))
    if d.desired != memory.autoscale_asked:  # the parent acts on it: not after the next status interval
        written = await site.kube.patch(SERVICE_CR, site.namespace, site.service, {"status": {"autoscaling": dumped}},
                                        status=True)  # fmt: skip
        if written is not None:
            memory.autoscale_asked = d.desired


def _known(status: AutoscalingStatus) -> AutoscalingStatus:
    """The decision with the figures it knows: one not known (None: no engine answered) is left out of
    status.autoscaling rather than written as null."""
    return AutoscalingStatus.model_validate(status.model_dump(exclude_none=True))


def _condition(reason: ScaleReason, message: str, auto: AutoscalingSpec) -> ConditionRecord:
    if reason is ScaleReason.OTHER_AUTOSCALER:  # names the HPA: stable while it exists
        return ConditionRecord(CONDITION, "False", reason, message)
    if reason in _HOLDS:
        return ConditionRecord(CONDITION, "False", reason, _HOLDS[reason])
    said = f"spec.replicas follows the engines' load within {auto.min_replicas}..{auto.max_replicas}"
    return ConditionRecord(CONDITION, "True", AutoscalingReason.FOLLOWING_LOAD, said)
