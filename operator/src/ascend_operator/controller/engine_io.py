"""What the health loop asks of an engine, and what it keeps between passes: its metrics (a scrape with
a per-pod timeout), its canary (run as a task beside the passes, judged by scrapes of its own) and the
API key both send. Split from controller/monitor.py, which decides what to do with the answers.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ascend_operator.api.reasons import EventReason
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.clients.engine import CanaryResult, Engines
from ascend_operator.clients.resources import Kube
from ascend_operator.clients.secrets import ApiKeyCache
from ascend_operator.contract.mindcluster import NodeReport
from ascend_operator.controller.laps import Laps
from ascend_operator.controller.service_state import EventSink
from ascend_operator.controller.views import PodView
from ascend_operator.health.judge import CanaryOutcome, PodHealth
from ascend_operator.health.machine import canary_due
from ascend_operator.health.node_loss import NodeState
from ascend_operator.health.samples import EngineSample, parse_metrics

log = logging.getLogger(__name__)


@dataclass
class MonitorState:
    """Per-service health memory: pod machines and running canaries by pod uid."""

    pods: dict[str, PodHealth] = field(default_factory=dict)
    canaries: dict[str, "asyncio.Task[CanaryOutcome]"] = field(default_factory=dict)
    announced: set[tuple[str, str]] = field(default_factory=set)
    """Warnings already posted (an unreadable key Secret), so each is one event, not one per pass."""
    scrape_failures: dict[str, int] = field(default_factory=dict)
    """A pass's scrapes that gave no sample, by pod uid (logged at debug with each failure)."""
    laps: Laps = field(default_factory=lambda: Laps(clock=time.monotonic))
    """Where the last pass spent its time (controller/laps.py), for the slow-pass log line."""

    def forget(self, keep: set[str]) -> None:
        """Drop the pods not in `keep` (gone, terminating), cancelling their canaries."""
        self.pods = {uid: h for uid, h in self.pods.items() if uid in keep}
        self.scrape_failures = {uid: n for uid, n in self.scrape_failures.items() if uid in keep}
        for uid in [u for u in self.canaries if u not in keep]:
            self.canaries.pop(uid).cancel()

    async def close(self) -> None:
        """Cancel every running canary and wait for them (the loop is stopping)."""
        tasks = list(self.canaries.values())
        self.canaries.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


@dataclass(frozen=True, kw_only=True)
class Monitor:
    """The I/O and clocks a pass uses, injected."""

    kube: Kube
    engines: Engines
    events: EventSink
    mono: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    keys: ApiKeyCache | None = None
    """Where API keys come from; None: engines are asked without one."""
    chips: Callable[[str], NodeReport | None] | None = None
    """The device plugin's and NodeD's report of a node (clients/chip_reports.py), None before its caches
    listed; None (the field): the operator does not read them (`aisctl operator --npu-faults` off)."""
    nodes: Callable[[str], NodeState | None] | None = None
    """A node's Ready condition, taints and Lease (clients/nodes.py), None when the node does not exist; None
    (the field): the operator does not watch nodes (`aisctl operator --node-loss` off)."""


def engine_base(pod: PodView, spec: AscendInferenceServiceSpec) -> str:
    return f"http://{pod.ip}:{spec.engine.port}"


@dataclass(frozen=True, slots=True)
class _Exposition:
    """A /metrics answer as fetched, with the time it came: parsing costs far more than fetching (at 200
    services it was a third of the operator's CPU), so a canary parses its own scrapes only if it needs them."""

    text: str
    t: float

    def sample(self) -> EngineSample | None:
        try:
            return parse_metrics(self.text, t=self.t)
        except ValueError:  # not a Prometheus exposition: as good as no answer
            return None


async def fetch_exposition(mon: Monitor, spec: AscendInferenceServiceSpec, pod: PodView) -> _Exposition | None:
    text = await mon.engines.get_text(f"{engine_base(pod, spec)}/metrics", timeout=spec.health.scrape_timeout_seconds)
    return None if text is None else _Exposition(text, mon.mono())


async def scrape(
    mon: Monitor, spec: AscendInferenceServiceSpec, pod: PodView, *, failures: dict[str, int] | None = None
) -> EngineSample | None:
    """One scrape parsed; a scrape without a sample is logged at debug with the time it took and counted in
    `failures` (by pod uid) when given."""
    started = mon.mono()
    fetched = await fetch_exposition(mon, spec, pod)
    sample = None if fetched is None else fetched.sample()
    if sample is None:
        why = "no answer (refused, error status or timeout)" if fetched is None else "not a Prometheus exposition"
        _scrape_failed(pod, why, elapsed=mon.mono() - started, timeout=spec.health.scrape_timeout_seconds, n=failures)
    return sample


def _scrape_failed(pod: PodView, why: str, *, elapsed: float, timeout: float, n: dict[str, int] | None) -> None:
    """Why a scrape gave no sample and how long it took. Three scrape intervals without one make the pod
    EngineNotAnswering; a lone flap under load is explained here: `elapsed` includes the wait for the
    engine client's concurrency limit, which a scrape queued behind many others spends before its own
    timeout starts."""
    count = ""
    if n is not None:
        n[pod.uid] = n.get(pod.uid, 0) + 1
        count = f" ({n[pod.uid]} failed scrape(s) of this pod)"
    log.debug("scrape of pod %s failed after %.2fs (timeout %.1fs): %s%s", pod.name, elapsed, timeout, why, count)


async def service_api_key(
    mon: Monitor, spec: AscendInferenceServiceSpec, namespace: str, state: MonitorState
) -> str | None:
    """The service's API key, or None (no key asked for, or the Secret cannot be read: announced once)."""
    ref = spec.auth.api_key_secret_ref
    if ref is None or mon.keys is None:
        return None
    key = await mon.keys.get(namespace, ref)
    marker = (EventReason.API_KEY_UNAVAILABLE, f"{ref.name}/{ref.key}")
    if key is None:
        if marker not in state.announced:
            state.announced.add(marker)
            mon.events(
                "Warning",
                EventReason.API_KEY_UNAVAILABLE,
                f"cannot read key {ref.key!r} of Secret {ref.name!r}; the canary and the config check go without it",
            )
        return None
    state.announced.discard(marker)
    return key.value


async def run_canary(
    mon: Monitor, spec: AscendInferenceServiceSpec, pod: PodView, *, namespace: str = "", api_key: str | None = None
) -> CanaryOutcome:
    """One canary between two scrapes of its own. Refused (401) with the key, it asks again with the
    Secret's previous value: an engine started before a rotation still takes that one until replaced.
    The scrapes only judge a canary without tokens (`CanaryOutcome.queued`), so one that returned tokens
    parses neither and takes no second scrape."""
    canary = spec.health.canary
    before = await fetch_exposition(mon, spec, pod)

    def ask(key: str | None) -> Awaitable[CanaryResult]:
        return mon.engines.canary(
            engine_base(pod, spec),
            model=spec.model.served_name,
            prompt=canary.prompt,
            max_tokens=canary.max_tokens,
            timeout=canary.timeout_seconds,
            api_key=key,
        )

    result = await ask(api_key)
    ref = spec.auth.api_key_secret_ref
    if result.status == 401 and ref is not None and mon.keys is not None:
        previous = mon.keys.previous(namespace, ref)
        if previous is not None:
            result = await ask(previous.value)
        if result.status == 401:
            mon.keys.invalidate(namespace, ref)  # maybe rotated again: read the Secret next pass
    if result.ok:
        return CanaryOutcome(ok=True, before=None, after=None, ended=mon.mono())
    after = await scrape(mon, spec, pod)
    return CanaryOutcome(
        ok=False,
        before=None if before is None else before.sample(),
        after=after,
        ended=mon.mono(),
        detail=result.error,
    )


def finished_canaries(state: MonitorState) -> dict[str, CanaryOutcome]:
    """Collect the canaries that ended; one that raised is a canary without tokens."""
    done: dict[str, CanaryOutcome] = {}
    for uid, task in list(state.canaries.items()):
        if not task.done():
            continue
        del state.canaries[uid]
        if task.cancelled():
            continue
        if (exc := task.exception()) is not None:
            log.warning("canary of pod uid %s failed: %r", uid, exc)
            continue
        done[uid] = task.result()
    return done


def launch_canaries(
    mon: Monitor,
    spec: AscendInferenceServiceSpec,
    state: MonitorState,
    pods: list[PodView],
    *,
    namespace: str,
    api_key: str | None,
) -> None:
    now = mon.mono()
    for pod in pods:
        if canary_due(state.pods[pod.uid], now=now, cfg=spec.health, in_flight=pod.uid in state.canaries):
            run = run_canary(mon, spec, pod, namespace=namespace, api_key=api_key)
            state.canaries[pod.uid] = asyncio.create_task(run, name=f"canary {pod.name}")
