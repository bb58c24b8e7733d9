"""The health loop of one service: gather observations, step each pod's machine, execute its actions.

The only I/O of health is here. Each pass scrapes every engine pod concurrently (per-pod timeouts), collects
the canaries that ended since the last pass, checks the effective config of pods not yet checked, steps
each pod's pure state machine (`ascend_operator.health.machine`), writes readiness gates, posts events and
hands its deletion candidates (stall, drift, age) to the disruption step (controller/deletions.py), which
decides for both loops at once. Canaries run on their own schedule as tasks beside the passes, each
judged against its own scrapes taken right before it was sent and right after it ended, so a canary queued
behind 32 busy slots for longer than a pass is judged by what the engine did while it waited. A failing gate
write (a pod deleted mid-pass answers 404) never ends the pass. Results for the status (engine figures,
rolls, condition overrides) go into the shared `ServiceMemory`; the reconcile loop patches them. With
spec.autoscaling, the pass ends with the autoscaler's decision on what it just saw (controller/autoscaling.py).
With `spec.auth.apiKeySecretRef`, the canary and the /v1/models check send the key read from the Secret
(cached, dropped when an engine answers 401; engines started before a rotation get the previous key);
a Secret that cannot be read is one event naming the Secret, never its value.
"""

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from ascend_operator.api.constants import ANNOTATION_DRIFT_BASELINE, READINESS_GATE
from ascend_operator.api.reasons import EventReason
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.api.status import LiveStatus
from ascend_operator.clients.resources import POD, service_pods
from ascend_operator.controller.analysis import observe_rollout
from ascend_operator.controller.autoscaling import autoscale, forget, other_autoscaler, signals
from ascend_operator.controller.deletions import Site, disrupt
from ascend_operator.controller.engine_io import (
    Monitor,
    MonitorState,
    engine_base,
    finished_canaries,
    launch_canaries,
    scrape,
    service_api_key,
)
from ascend_operator.controller.node_losses import node_losses
from ascend_operator.controller.operator_metrics import publish_engines, publish_figures, record_canary_failure
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.controller.status import PodFault, overlay
from ascend_operator.controller.timestamps import epoch, iso
from ascend_operator.controller.views import PodView, pod_view
from ascend_operator.disruption import Candidate, RollReason
from ascend_operator.health.aggregate import service_metrics
from ascend_operator.health.chips import ChipFinding, judge_chips
from ascend_operator.health.config import check_config, expected_config
from ascend_operator.health.drift import dump_baseline, load_baseline, peer_ratios
from ascend_operator.health.group import observe
from ascend_operator.health.judge import FAULTS, PodHealth, Verdict
from ascend_operator.health.machine import (
    Action,
    Announce,
    Observations,
    RequestRoll,
    SetGate,
    config_check_due,
    gate_not_written,
    resume,
    step,
)
from ascend_operator.health.recycle import recycle_due
from ascend_operator.health.samples import EngineSample
from ascend_operator.health.stall import decode_slots

log = logging.getLogger(__name__)


async def _config_checks(
    mon: Monitor,
    spec: AscendInferenceServiceSpec,
    state: MonitorState,
    pods: list[PodView],
    samples: Mapping[str, EngineSample | None],
    api_key: str | None = None,
) -> dict[str, tuple[str, ...]]:
    """Check the effective config of pods not yet checked; uid -> mismatches (empty: it matches)."""
    expected = expected_config(spec)
    found: dict[str, tuple[str, ...]] = {}
    for p in pods:
        sample = samples.get(p.uid)
        if sample is None or not config_check_due(state.pods[p.uid]):
            continue
        models = await mon.engines.get_json(
            f"{engine_base(p, spec)}/v1/models", timeout=spec.health.scrape_timeout_seconds, api_key=api_key
        )
        if models is not None:
            found[p.uid] = tuple(str(m) for m in check_config(expected, models=models, sample=sample))
    return found


async def _execute(
    mon: Monitor, state: MonitorState, pod: PodView, namespace: str, actions: tuple[Action, ...]
) -> list[Candidate]:
    """Carry out a machine's gate writes and announcements; its roll requests come back as the pass's
    deletion candidates (the disruption step decides them with every other candidate)."""
    rolls: list[Candidate] = []
    for action in actions:
        if isinstance(action, RequestRoll):
            rolls.append(Candidate(pod=pod.name, uid=pod.uid, reason=action.reason, message=action.message))
        elif isinstance(action, Announce):
            mon.events(action.type, action.reason, f"pod {pod.name}: {action.message}")
        elif isinstance(action, SetGate):
            condition = {
                "type": READINESS_GATE,
                "status": "True" if action.ready else "False",
                "reason": action.reason,
                "message": action.message[:1000],
                "lastTransitionTime": iso(mon.wall()),
            }
            try:
                patch = {"status": {"conditions": [condition]}}
                written = await mon.kube.patch(POD, namespace, pod.name, patch, status=True)
            except (kopf.TemporaryError, kopf.PermanentError) as exc:
                log.warning("readiness gate of pod %s/%s not written: %s", namespace, pod.name, exc)
                written = None
            if written is None:  # gone (404) or refused: the next pass writes it again if the pod is still there
                state.pods[pod.uid] = gate_not_written(state.pods[pod.uid])
    return rolls


def _recycle(spec: AscendInferenceServiceSpec, pods: list[PodView], *, now: float) -> list[Candidate]:
    """Pods past their maximum age (`spec.health.recycle`)."""
    return [
        Candidate(
            pod=p.name,
            uid=p.uid,
            reason=RollReason.MAX_AGE,
            message=f"older than {spec.health.recycle.max_age_hours} h",
        )
        for p in pods
        if not p.terminating and recycle_due(started_at=epoch(p.started_at), now=now, cfg=spec.health.recycle)
    ]


async def _keep_baselines(mon: Monitor, state: MonitorState, pods: list[PodView], namespace: str) -> None:
    """Write each pod's drift baseline to its annotation when it learned something new (bounded: learning
    stops once every batch size has its windows). A failed write is tried again next pass."""
    for pod in pods:
        baseline = state.pods[pod.uid].drift.baseline
        if not baseline.points or (text := dump_baseline(baseline)) == pod.drift_baseline:
            continue
        patch = {"metadata": {"annotations": {ANNOTATION_DRIFT_BASELINE: text}}}
        try:
            await mon.kube.patch(POD, namespace, pod.name, patch)
        except (kopf.TemporaryError, kopf.PermanentError) as exc:
            log.warning("drift baseline of pod %s/%s not written: %s", namespace, pod.name, exc)


def _share(
    memory: ServiceMemory,
    state: MonitorState,
    samples: Mapping[str, EngineSample | None],
    *,
    scraped_at: float,
    holds_kv: bool = False,
) -> None:
    """What the disruption step reads from the health loop: requests in flight per pod (None: no answer;
    running + waiting, the engine's own gauges) and the pods that have served. A P/D prefill engine
    (`holds_kv`) keeps a finished request's KV blocks until a decode engine pulls them (vLLM 0.25.1
    vllm/v1/core/sched/scheduler.py `_free_request`: the connector's request_finished delays the free), so
    KV in use there is one more request in flight: a drain that ended before the pull would fail the
    decode side's request (found by the P/D autoscaling e2e: a prefill pool's scale-down)."""
    memory.in_flight = {
        uid: None if s is None else round(s.running + s.waiting) + int(holds_kv and s.kv_usage > 0)
        for uid, s in samples.items()
    }
    memory.unanswered_since = {
        uid: memory.unanswered_since.get(uid, scraped_at) for uid, s in samples.items() if s is None
    }
    _count_arrivals(memory, samples, scraped_at=scraped_at)
    memory.scraped_at = scraped_at
    memory.served = {uid for uid, health in state.pods.items() if health.served}


def _count_arrivals(memory: ServiceMemory, samples: Mapping[str, EngineSample | None], *, scraped_at: float) -> None:
    """Which engines requests reached since their previous answered scrape, and in which interval (what a
    drain's quiet is timed from, disruption/model.py PodState.arrived). A count that went down (a restarted
    engine, clients' aborts) is a new baseline, no arrival."""
    seen = {uid: (scraped_at, s.finished + s.running + s.waiting) for uid, s in samples.items() if s is not None}
    for uid, (_, count) in seen.items():
        before = memory.requests_seen.get(uid)
        if before is not None and count > before[1]:
            memory.arrived[uid] = (before[0], scraped_at)
    unanswered = {uid: memory.requests_seen[uid] for uid in samples if uid in memory.requests_seen}
    memory.requests_seen = {**unanswered, **seen}  # an unanswered scrape keeps the last count to compare with
    memory.arrived = {uid: w for uid, w in memory.arrived.items() if uid in samples}


def _loading(pod: PodView, state: MonitorState, spec: AscendInferenceServiceSpec, *, now: float) -> bool:
    """The engine is still loading its weights (the one startup-grace rule, api/health.py)."""
    return spec.health.in_startup_grace(epoch(pod.started_at), served=state.pods[pod.uid].served, now=now)


def _chip_finding(mon: Monitor, state: MonitorState, pod: PodView, every: list[PodView]) -> ChipFinding | None:
    """The device plugin's verdict on the pod's chips, or on a group's (a leader answers for its workers,
    whose ranks talk over RoCE: their network faults count). A report that does not parse is one event."""
    if mon.chips is None:
        return None
    group = pod.worker_index == 0
    members = [pod, *(w for w in every if group and w.replica == pod.replica and w.worker_index not in (None, 0))]
    for member in members:
        report = mon.chips(member.node) if member.node else None
        if report is None:
            continue
        for problem in report.problems:
            if (EventReason.CHIP_REPORT_UNREADABLE, problem) not in state.announced:
                state.announced.add((EventReason.CHIP_REPORT_UNREADABLE, problem))
                mon.events("Warning", EventReason.CHIP_REPORT_UNREADABLE, f"node {report.node}: {problem}")
        found = judge_chips(report, member.chips, group_member=group, now=mon.wall())
        if found is not None:
            return found
    return None


def _resume(pod: PodView) -> PodHealth:
    """A pod this operator process sees for the first time, from what it carries (health/machine.py `resume`):
    its gate, its drift baseline, whether its engine restarted after the gate was last written, and whether
    the kubelet saw its startup probe pass."""
    started, since = epoch(pod.engine_started_at), epoch(pod.gate_since)
    return resume(
        pod.gate,
        load_baseline(pod.drift_baseline),
        restarts=pod.engine_restarts,
        restarted_since_gate=started is not None and since is not None and started > since,
        loaded=pod.engine_loaded,
    )


def _figures(live: LiveStatus) -> dict[str, Any]:
    """One pod's figures as `status.metrics` names them (camelCase), for its series."""
    return {} if live.metrics is None else live.metrics.model_dump(by_alias=True, exclude_unset=True)


def _faults(pods: list[PodView], verdicts: Mapping[str, Verdict]) -> dict[str, PodFault]:
    """Verdicts that are a fault of the pod (the chain's `fault` rules): the status names them as the
    replica's cause (`causes.py`)."""
    return {p.uid: PodFault(v.reason, v.message) for p in pods if (v := verdicts.get(p.uid)) and v.reason in FAULTS}


async def health_pass(
    mon: Monitor,
    *,
    spec: AscendInferenceServiceSpec,
    namespace: str,
    service: str,
    state: MonitorState,
    memory: ServiceMemory,
) -> None:
    """One pass over the service's pods."""
    # A group is judged through its leader (it serves the API and the metrics of every DP rank); a
    # worker is `--headless`. Deleting a leader recreates its whole group (RecreateGroupOnPodRestart).
    # The worker pods are kept for the group's verdict (health.group: a gone worker is WorkerGone).
    state.laps.start()
    every = [pod_view(p) for p in await service_pods(mon.kube, namespace, service)]
    state.laps.lap("pods")
    views = [v for v in every if v.leader_or_single]
    live = [p for p in views if p.ip and p.phase == "Running" and not p.terminating]
    state.forget({p.uid for p in live})
    state.pods = {p.uid: state.pods.get(p.uid) or _resume(p) for p in live}
    scraped_at = mon.wall()
    samples = dict(
        zip(
            (p.uid for p in live),
            await asyncio.gather(*(scrape(mon, spec, p, failures=state.scrape_failures) for p in live)),
            strict=True,
        )
    )
    state.laps.lap("scrape")
    answering = [p for p in live if samples[p.uid] is not None]
    outcomes = finished_canaries(state)
    api_key = await service_api_key(mon, spec, namespace, state) if answering else None
    configs = await _config_checks(mon, spec, state, answering, samples, api_key)
    state.laps.lap("config check")
    verdicts: dict[str, Verdict] = {}
    rolls: list[Candidate] = []  # what the machines ask for, and nothing else: their actions are the only path
    for pod in live:
        obs = Observations(
            sample=samples[pod.uid],
            canary=outcomes.get(pod.uid),
            config=configs.get(pod.uid),
            group=observe(pod, every, spec),
            draining=pod.drain is not None,
            chips=_chip_finding(mon, state, pod, every),
            peers=peer_ratios(
                {u: h.drift for u, h in state.pods.items()},
                pod.uid,
                now=mon.mono(),
                cfg=spec.health.drift,
                ready_since={u: h.ready_since for u, h in state.pods.items()},
            ),
            restarts=pod.engine_restarts,
            last_exit=pod.engine_last_exit or "",
        )
        health = state.pods[pod.uid]
        state.pods[pod.uid], verdicts[pod.uid], actions = step(
            health, obs, now=mon.mono(), cfg=spec.health, decode_slots=decode_slots(spec)
        )
        if state.pods[pod.uid].canary_failures > health.canary_failures:  # a canary that counted as failed
            record_canary_failure(namespace, service, pod.name)
        rolls += await _execute(mon, state, pod, namespace, actions)
    publish_engines(
        namespace,
        service,
        {
            p.name: (verdicts[p.uid].ready, verdicts[p.uid].reason, _loading(p, state, spec, now=mon.wall()))
            for p in live
        },
    )
    state.laps.lap("judge and gates")
    await _keep_baselines(mon, state, live, namespace)
    prefill = spec.pd_role is not None and spec.pd_role.role.value == "prefill"
    _share(memory, state, samples, scraped_at=scraped_at, holds_kv=prefill)
    site = Site(kube=mon.kube, events=mon.events, namespace=namespace, service=service, clock=mon.wall)
    # refused health rolls become memory.overrides: what was found, on which pod, and which rule held it
    candidates = rolls + _recycle(spec, views, now=mon.wall()) + node_losses(mon, spec, every, samples, memory)
    await disrupt(site, memory, spec, source="health", candidates=candidates)
    state.laps.lap("disruption")
    # a draining pod takes no canary: its requests must reach 0, and the canary is one
    idle = [p for p in answering if p.drain is None]
    launch_canaries(mon, spec, state, idle, namespace=namespace, api_key=api_key)
    memory.pod_faults = _faults(live, verdicts)
    observe_rollout(  # spec.rollout.analysis: the judged replica's window and verdict (controller/analysis.py)
        memory,
        spec.rollout.analysis,
        live=live,
        ready={uid for uid, v in verdicts.items() if v.ready},
        samples=samples,
        canary_failures={p.uid: state.pods[p.uid].canary_failures for p in live},
        now=mon.mono(),
    )
    now = mon.mono()
    memory.live = overlay(memory.live, service_metrics([state.pods[p.uid].samples for p in live], now=now))
    per_pod = {p.name: _figures(service_metrics([state.pods[p.uid].samples], now=now)) for p in live}
    publish_figures(namespace, service, per_pod)  # full rate, beside the status' every-30-s sums
    if spec.autoscaling is None:
        forget(site, memory)
        return
    found = signals(
        spec,
        views=[p for p in views if p.leader_or_single],
        ready={uid for uid, v in verdicts.items() if v.ready},
        samples=samples,
        histories=[state.pods[p.uid].samples for p in live],
        served=memory.served,
        now=now,
        wall=mon.wall(),
        hpa=await other_autoscaler(site),
    )
    await autoscale(site, memory, spec, found, now=now)
    state.laps.lap("autoscaling")
