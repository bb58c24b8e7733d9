"""The health loop of one service: scrape, canary, check, judge, gate, roll. The only I/O is here.

Each pass scrapes every engine pod concurrently (per-pod timeouts), runs due canaries, checks the
effective config of pods that have not passed it, folds everything into each pod's `PodHealth`, sets the
readiness gate on change, and hands roll requests to the roll policy. Results for the status (engine
figures, rolls, condition overrides) go into the shared `ServiceMemory`; the reconcile loop patches them.
"""

import asyncio
import datetime
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from prometheus_client import Counter

from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.clients.engine import EngineClient, scrape_all
from ascend_operator.clients.kube import KubeApi
from ascend_operator.controller.reconcile import EventSink, ServiceMemory
from ascend_operator.controller.views import PodView, pod_view
from ascend_operator.health.aggregate import service_metrics
from ascend_operator.health.config import check_config, expected_config
from ascend_operator.health.judge import PodHealth, Verdict, fold_canary, fold_sample, judge, mark_ready
from ascend_operator.health.recycle import recycle_due
from ascend_operator.health.rolls import PodState, RollReason, decide_roll
from ascend_operator.health.samples import EngineSample, parse_metrics
from ascend_operator.render.probes import READINESS_GATE

ROLLS = Counter("ascend_operator_rolls", "Pods recreated by the operator", ["namespace", "service", "reason"])
REFUSED = Counter("ascend_operator_rolls_refused", "Rolls the policy refused", ["namespace", "service", "rule"])
KEEP_ROLLS = 20


def iso(epoch: float) -> str:
    """RFC 3339 UTC."""
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch(stamp: str | None) -> float | None:
    """Parse an RFC 3339 timestamp as the API server writes it."""
    if not stamp:
        return None
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@dataclass
class MonitorState:
    """Per-service health memory: pod states by uid, and what was announced already."""

    pods: dict[str, PodHealth] = field(default_factory=dict)
    gates: dict[str, tuple[bool, str]] = field(default_factory=dict)
    announced: set[tuple[str, str]] = field(default_factory=set)


@dataclass(frozen=True, kw_only=True)
class Monitor:
    """The I/O and clocks a pass uses, injected."""

    kube: KubeApi
    engines: EngineClient
    events: EventSink
    mono: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time


def _base(pod: PodView, spec: AscendInferenceServiceSpec) -> str:
    return f"http://{pod.ip}:{spec.engine.port}"


async def _canaries(
    mon: Monitor, spec: AscendInferenceServiceSpec, state: MonitorState, pods: list[PodView]
) -> dict[str, tuple[bool, EngineSample | None]]:
    """Run the due canaries; uid -> (tokens came back, the sample taken before)."""
    canary = spec.health.canary
    now = mon.mono()
    due = [
        p for p in pods
        if (last := state.pods[p.uid].last_canary) is None or now - last >= canary.period_seconds
    ]  # fmt: skip
    befores = {p.uid: (state.pods[p.uid].samples or (None,))[-1] for p in due}
    results = await asyncio.gather(
        *(
            mon.engines.canary(
                _base(p, spec),
                model=spec.model.served_name,
                prompt=canary.prompt,
                max_tokens=canary.max_tokens,
                timeout=canary.timeout_seconds,
            )
            for p in due
        )
    )
    return {p.uid: (result.ok, befores[p.uid]) for p, result in zip(due, results, strict=True)}


async def _config_checks(
    mon: Monitor, spec: AscendInferenceServiceSpec, state: MonitorState, pods: list[PodView]
) -> dict[str, tuple[str, ...]]:
    """Check the effective config of pods not yet checked; uid -> mismatches (empty: it matches)."""
    expected = expected_config(spec)
    found: dict[str, tuple[str, ...]] = {}
    for p in pods:
        health = state.pods[p.uid]
        if health.mismatches is not None or not health.samples:
            continue
        models = await mon.engines.get_json(f"{_base(p, spec)}/v1/models", timeout=spec.health.scrape_timeout_seconds)
        if models is not None:
            found[p.uid] = tuple(str(m) for m in check_config(expected, models=models, sample=health.samples[-1]))
    return found


def _fold_checks(
    mon: Monitor,
    state: MonitorState,
    pods: list[PodView],
    canaries: Mapping[str, tuple[bool, EngineSample | None]],
    configs: Mapping[str, tuple[str, ...]],
) -> None:
    for p in pods:
        if p.uid in canaries:
            ok, before = canaries[p.uid]
            state.pods[p.uid] = fold_canary(state.pods[p.uid], ok=ok, before=before, now=mon.mono())
        if p.uid in configs:
            state.pods[p.uid] = replace(state.pods[p.uid], mismatches=configs[p.uid])
            if configs[p.uid]:
                mon.events("Warning", "ConfigMismatch", f"pod {p.name}: " + "; ".join(configs[p.uid]))


async def _set_gate(mon: Monitor, state: MonitorState, pod: PodView, namespace: str, verdict: Verdict) -> None:
    if state.gates.get(pod.uid) == (verdict.ready, verdict.reason):
        return
    condition = {
        "type": READINESS_GATE,
        "status": "True" if verdict.ready else "False",
        "reason": verdict.reason,
        "message": verdict.message[:1000],
        "lastTransitionTime": iso(mon.wall()),
    }
    await mon.kube.patch_pod_status(namespace, pod.name, {"status": {"conditions": [condition]}})
    state.gates[pod.uid] = (verdict.ready, verdict.reason)


def _history(memory: ServiceMemory) -> list[float]:
    return [t for r in memory.extra_status.get("rolls") or [] if (t := epoch(r.get("time"))) is not None]


def _record_roll(memory: ServiceMemory, *, now: float, pod: str, reason: RollReason, message: str) -> None:
    roll = {"time": iso(now), "pod": pod, "reason": reason.value, "message": message[:1000]}
    memory.extra_status["rolls"] = [*(memory.extra_status.get("rolls") or []), roll][-KEEP_ROLLS:]
    memory.extra_status["lastRoll"] = roll


async def _rolls(
    mon: Monitor,
    spec: AscendInferenceServiceSpec,
    memory: ServiceMemory,
    pods: list[PodView],
    verdicts: Mapping[str, Verdict],
    health_by_uid: Mapping[str, PodHealth],
    namespace: str,
    service: str,
) -> list[tuple[str, str, str, str]]:
    """Ask the policy about every roll request; do at most one; return condition overrides for refusals."""
    now = mon.wall()
    served = {uid for uid, health in health_by_uid.items() if health.served}
    states = [
        PodState(
            name=p.name,
            ready=p.ready,
            terminating=p.terminating,
            started_at=epoch(p.started_at),
            served=p.uid in served,
        )
        for p in pods
    ]
    requests = [(p, v.roll, v.message) for p in pods if (v := verdicts.get(p.uid)) and v.roll]
    requests += [
        (p, RollReason.MAX_AGE, f"older than {spec.health.recycle.max_age_hours} h")
        for p in pods
        if recycle_due(started_at=epoch(p.started_at), now=now, cfg=spec.health.recycle)
    ]
    overrides = []
    for pod, reason, message in requests:
        decision = decide_roll(
            pod=pod.name, reason=reason, pods=states, history=_history(memory), now=now, cfg=spec.health
        )
        if not decision.allowed:
            REFUSED.labels(namespace, service, decision.rule).inc()
            overrides.append(("Degraded", "True", "RollDeferred", f"{reason} on {pod.name}: {decision.message}"))
            continue
        if await mon.kube.delete_pod(namespace, pod.name, pod.uid):
            ROLLS.labels(namespace, service, reason.value).inc()
            _record_roll(memory, now=now, pod=pod.name, reason=reason, message=message)
            mon.events("Warning", "Rolled", f"recreating pod {pod.name}, reason {reason.value}: {message}")
        break  # one roll per pass: the next pass sees the replica out and the policy holds the rest
    return overrides


#: Pod findings shown on the service's Degraded condition, most serious first.
DEGRADING_REASONS = ("ConfigMismatch", "Stalled")


def _overrides(pods: list[PodView], verdicts: Mapping[str, Verdict]) -> list[tuple[str, str, str, str]]:
    judged = [(p, verdicts[p.uid]) for p in pods if p.uid in verdicts]
    for reason in DEGRADING_REASONS:
        for pod, verdict in judged:
            if verdict.reason == reason:
                return [("Degraded", "True", reason, f"pod {pod.name}: {verdict.message}")]
    return []


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
    views = [pod_view(p) for p in await mon.kube.list_pods(namespace, service)]
    live = [p for p in views if p.ip and p.phase == "Running" and not p.terminating]
    state.pods = {p.uid: state.pods.get(p.uid, PodHealth()) for p in live}
    state.gates = {uid: g for uid, g in state.gates.items() if uid in state.pods}
    texts = await scrape_all(
        mon.engines, [f"{_base(p, spec)}/metrics" for p in live], timeout=spec.health.scrape_timeout_seconds
    )
    for pod, text in zip(live, texts, strict=True):
        if text is not None:
            state.pods[pod.uid] = fold_sample(state.pods[pod.uid], parse_metrics(text, t=mon.mono()), cfg=spec.health)
    answering = [p for p, text in zip(live, texts, strict=True) if text is not None]
    canaries, configs = await asyncio.gather(
        _canaries(mon, spec, state, answering), _config_checks(mon, spec, state, answering)
    )
    _fold_checks(mon, state, answering, canaries, configs)
    now = mon.mono()
    verdicts = {}
    for pod in live:
        verdict = judge(state.pods[pod.uid], now=now, cfg=spec.health)
        state.pods[pod.uid] = mark_ready(state.pods[pod.uid], verdict, now=now)
        verdicts[pod.uid] = verdict
        await _set_gate(mon, state, pod, namespace, verdict)
    refused = await _rolls(mon, spec, memory, views, verdicts, state.pods, namespace, service)
    # a refused roll says most: what was found, on which pod, and which rule held it back
    memory.overrides = refused or _overrides(live, verdicts)
    memory.extra_status.update(service_metrics([state.pods[p.uid].samples for p in live], now=now))
