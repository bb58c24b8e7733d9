"""kopf wiring: thin handlers that hand every object to the pure reconcile pass.

One daemon per AscendInferenceService runs the reconcile loop: a pass, then a wait until a watched change
(of the service or of one of its pods) wakes it or the resync period passes, until kopf stops it. Waking
instead of polling keeps reaction time low; the resync bounds how stale a missed event can leave things.
"""

import asyncio
import contextlib
import datetime
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
import kopf
from kubernetes import client

from ascend_operator.api.constants import (
    CHIP_NAME_LABEL,
    DRIVER_VERSION_LABEL,
    GROUP,
    LABEL_SERVICE,
    NPU_RESOURCE,
    PLURAL,
    VERSION,
)
from ascend_operator.api.parse import SpecError, parse_spec
from ascend_operator.api.status import AnyEventReason
from ascend_operator.clients.caches import Caches
from ascend_operator.clients.chip_reports import ChipReports, NodeLabels
from ascend_operator.clients.engine import EngineClient
from ascend_operator.clients.kube import KubeApi, load_config
from ascend_operator.clients.nodes import NodeLiveness
from ascend_operator.clients.secrets import ApiKeyCache, read_secret_key
from ascend_operator.controller.deletions import stored_rolls
from ascend_operator.controller.engine_io import Monitor, MonitorState
from ascend_operator.controller.laps import Laps
from ascend_operator.controller.monitor import health_pass
from ascend_operator.controller.operator_metrics import forget_service, publish_chip_reports, record_pass, start_service
from ascend_operator.controller.reconcile import Context, reconcile
from ascend_operator.controller.service_state import EventSink, ServiceMemory
from ascend_operator.controller.status import DEFAULT_LIVE_INTERVAL
from ascend_operator.health.chips import keep_off
from ascend_operator.render.disaggregation import LABEL_PD_GROUP
from ascend_operator.render.fitness import NodeFacts
from ascend_operator.render.netpol import OperatorPeer

#: Seconds between passes when nothing wakes the loop.
DEFAULT_RESYNC_SECONDS = 30.0
#: Seconds a loop waits after a failed pass before events may wake it again.
ERROR_BACKOFF_SECONDS = 5.0
#: A pass that takes this long is logged with its time (a reconcile pass with its laps: controller/laps.py);
#: every pass's time is also the histogram `ascend_operator_pass_duration_seconds{loop}`.
SLOW_PASS_SECONDS = 5.0
#: Resync periods vary by this fraction either way.
JITTER = 0.1
#: The health loop's period while a spec does not parse (spec.health.scrapeIntervalSeconds' default).
DEFAULT_SCRAPE_SECONDS = 5.0


def _scrape_interval(body: kopf.Body) -> float:
    """The service's scrape interval, or the default while its spec does not parse."""
    try:
        return parse_spec(body.get("spec") or {}).health.scrape_interval_seconds
    except SpecError:
        return DEFAULT_SCRAPE_SECONDS


def utc_now() -> str:
    """RFC 3339 timestamp for conditions."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Operator-wide settings and the shared clients."""
    # kopf's own bookkeeping goes under our API group, not kopf.zalando.org.
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    # Bounded watches: a silently dead connection is replaced within minutes.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    # Events are posted explicitly with reasons; only warnings from logs become events too.
    settings.posting.level = logging.WARNING
    load_config()
    # watch caches of the pods, Services, PDBs and NetworkPolicies the operator renders: a pass reads
    # them instead of listing (issue 14), and a change wakes the owning service's loop
    memo.caches = Caches(client.ApiClient(), namespaces=list(memo.get("namespaces") or ()))
    memo.caches.start(on_change=functools.partial(_owner_changed, memo))
    memo.kube = KubeApi(caches=memo.caches)
    # the device plugin's chip reports, read only when asked for (the chart grants the reads with the flag)
    memo.node_labels = NodeLabels(client.ApiClient()) if memo.get("npu_faults") else None
    labels = memo.node_labels
    memo.chip_reports = ChipReports(client.ApiClient(), capacity=labels.capacity) if labels is not None else None
    if memo.node_labels is not None:
        memo.node_labels.start()
    # the nodes' Ready condition, taints and Leases, for the lost-node rules (health/node_loss.py)
    memo.node_liveness = NodeLiveness(client.ApiClient()) if memo.get("node_loss") else None
    if memo.node_liveness is not None:
        memo.node_liveness.start()
    if memo.chip_reports is not None:
        reports = memo.chip_reports
        memo.chip_reports.start(on_change=lambda _: publish_chip_reports(reports.reports(), now=time.time()))
    # no connector-wide limit (aiohttp's default 100 would queue a 200-service fleet's canaries inside
    # their timeouts); EngineClient bounds scrapes and canaries itself, before their timeouts start
    memo.engines = EngineClient(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
    memo.api_keys = ApiKeyCache(read=functools.partial(read_secret_key, memo.kube))
    memo.setdefault("operator_peer", OperatorPeer())
    memo.wakers = {}
    memo.services = {}
    memo.setdefault("resync_seconds", DEFAULT_RESYNC_SECONDS)
    memo.setdefault("live_interval", DEFAULT_LIVE_INTERVAL)
    memo.setdefault("npu_resource", NPU_RESOURCE)


@kopf.on.cleanup()
async def close_clients(memo: kopf.Memo, **_: Any) -> None:
    """Close the engines' HTTP session and stop the watch caches on shutdown."""
    memo.caches.stop()
    if memo.get("chip_reports") is not None:
        memo.chip_reports.stop()
    if memo.get("node_labels") is not None:
        memo.node_labels.stop()
    if memo.get("node_liveness") is not None:
        memo.node_liveness.stop()
    await memo.engines.close()


def service_memory(memo: kopf.Memo, body: kopf.Body) -> ServiceMemory:
    """The memory both loops of one service share; roll history is seeded from the stored status."""
    key = (body.metadata.namespace, body.metadata.name)
    if key not in memo.services:
        memory = ServiceMemory()
        memory.rolls = stored_rolls(body.status)  # recorded-but-not-deleted rolls are completed
        memo.services[key] = memory
    result: ServiceMemory = memo.services[key]
    return result


def _wake(memo: kopf.Memo, namespace: str | None, name: str | None) -> None:
    waker = memo.wakers.get((namespace, name))
    if waker is not None:
        waker.set()


@kopf.on.event(GROUP, VERSION, PLURAL)
async def service_changed(
    namespace: str | None, name: str | None, labels: Mapping[str, str], memo: kopf.Memo, **_: Any
) -> None:
    """A spec or status change of a service: wake its loop, and for a role of a disaggregated service the
    parent's too (its status is the pair's). Async: kopf runs a sync handler in a worker thread, a hop of
    milliseconds on every event of the fleet and on a new service's path to its pod."""
    _wake(memo, namespace, name)
    if group := labels.get(LABEL_PD_GROUP):
        _wake(memo, namespace, group)


def _owner_changed(memo: kopf.Memo, obj: Mapping[str, Any]) -> None:
    """A cached pod, Service, PDB or NetworkPolicy changed: wake the loop of the service that owns it.
    (Not a kopf handler: kopf watches every pod of the cluster and filters labels in the client; the
    caches' watch is label-selected by the API server.)"""
    meta = obj.get("metadata") or {}
    _wake(memo, meta.get("namespace"), (meta.get("labels") or {}).get(LABEL_SERVICE))


def _poster(body: kopf.Body) -> EventSink:
    """Events about this service, posted by kopf."""

    def post(type: str, reason: AnyEventReason, message: str) -> None:
        kopf.event(body, type=type, reason=reason, message=message)

    return post


async def _guarded(
    run: Callable[[], Awaitable[object]],
    *,
    stopped: kopf.DaemonStopped,
    logger: kopf.Logger,
    loop: str,
    laps: Laps | None = None,
) -> None:
    """Run one pass of `loop` and time it; an error is logged and followed by a back-off, never allowed to
    end the loop. A slow pass is logged with where its time went, when it kept `laps`."""
    what = f"{loop} pass"
    started = time.monotonic()
    try:
        await run()
        took = time.monotonic() - started
        record_pass(loop, took)
        if took >= SLOW_PASS_SECONDS:
            logger.info(f"{what} took {took:.1f}s" + (f": {laps.summary()}" if laps is not None else ""))
        return
    except kopf.TemporaryError as exc:
        logger.info(f"{what} will be retried: {exc}")
    except kopf.PermanentError as exc:
        logger.warning(f"{what} failed: {exc}")
    except Exception:  # a bug must not end the loop: log it, retry on the next pass
        logger.exception(f"{what} raised; retrying on the next pass")
    await stopped.wait(ERROR_BACKOFF_SECONDS)  # events may not hurry a failing pass


async def _relay_stop(stopped: kopf.DaemonStopped, waker: asyncio.Event) -> None:
    """Wake the loop when kopf stops it, so its wait needs no polling of the stop flag: at 200 services,
    0.5 s polls were 400 timers a second and ~6% of the operator's CPU (docs/scale.md)."""
    await stopped.wait()
    waker.set()


async def _sleep(stopped: kopf.DaemonStopped, waker: asyncio.Event, seconds: float) -> None:
    """Wait until woken (an event, or the stop relay), or `seconds` pass."""
    if stopped:
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(waker.wait(), timeout=seconds)


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_backoff=2.0, cancellation_timeout=10.0)
async def service_loop(
    stopped: kopf.DaemonStopped,
    body: kopf.Body,
    name: str,
    namespace: str | None,
    memo: kopf.Memo,
    logger: kopf.Logger,
    **_: Any,
) -> None:
    """The reconcile loop of one service; never lets an error end it."""
    waker = memo.wakers.setdefault((namespace, name), asyncio.Event())

    ctx = Context(
        kube=memo.kube,
        events=_poster(body),
        now=utc_now,
        npu_resource=str(memo.npu_resource),
        operator=memo.operator_peer,
        keys=memo.api_keys,
        live_interval=float(memo.live_interval),
        nodes=_node_facts(memo.node_labels) if memo.get("node_labels") is not None else None,
        unhealthy_nodes=_kept_off(memo),
    )
    memory = service_memory(memo, body)
    laps = Laps(clock=ctx.mono)
    if namespace is not None:
        start_service(namespace, name)
    # only ever cancelled when kopf gives up on this daemon: on a stop, it has ended already
    relay = asyncio.create_task(_relay_stop(stopped, waker), name=f"stop relay {namespace}/{name}")
    try:
        while not stopped:
            waker.clear()
            run = functools.partial(reconcile, body, ctx, memory, laps=laps)
            await _guarded(run, stopped=stopped, logger=logger, loop="reconcile", laps=laps)
            # jittered, so services created together do not resync together
            await _sleep(stopped, waker, float(memo.resync_seconds) * random.uniform(1 - JITTER, 1 + JITTER))
    finally:
        relay.cancel()
        memo.wakers.pop((namespace, name), None)
        memo.services.pop((namespace, name), None)
        if namespace is not None:
            forget_service(namespace, name)  # a gone service leaves no series (and no alert) behind


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_backoff=2.0, cancellation_timeout=10.0)
async def health_loop(
    stopped: kopf.DaemonStopped,
    body: kopf.Body,
    name: str,
    namespace: str | None,
    memo: kopf.Memo,
    logger: kopf.Logger,
    **_: Any,
) -> None:
    """Judge the service's engines every scrape interval; never lets an error end it."""
    reports = memo.get("chip_reports")
    monitor = Monitor(
        kube=memo.kube,
        engines=memo.engines,
        events=_poster(body),
        keys=memo.api_keys,
        chips=None if reports is None else reports.report,
        nodes=None if memo.get("node_liveness") is None else memo.node_liveness.state,
    )
    state = MonitorState(laps=Laps(clock=monitor.mono))  # the pass's own clock, as the reconcile loop's
    interval = _scrape_interval(body)
    # the first pass at a random point of the scrape interval: a fleet's passes spread over it instead of
    # running (and scraping, and waking their reconcile loops) together
    await stopped.wait(random.uniform(0, interval))
    try:
        while not stopped:
            try:
                spec = parse_spec(body.get("spec") or {})
            except SpecError:
                spec = None  # the reconcile loop reports it; nothing to judge against
            if spec is not None and namespace is not None:
                interval = spec.health.scrape_interval_seconds
                memory = service_memory(memo, body)
                found = memory.verdicts()
                run = functools.partial(
                    health_pass, monitor, spec=spec, namespace=namespace, service=name, state=state, memory=memory
                )
                await _guarded(run, stopped=stopped, logger=logger, loop="health", laps=state.laps)
                # the reconcile loop patches what the pass found: at once when a verdict changed, the live
                # engine figures only every live_interval (they change at every scrape under load)
                live = memory.live_due(body.get("status"), now=time.monotonic(), interval=float(memo.live_interval))
                if memory.verdicts() != found or live:
                    _wake(memo, namespace, name)
            # the whole interval after each pass, not a fixed rate: when the engines (or this process) fall
            # behind, passes that start back to back keep every scrape slot taken, and at 200 services on
            # 2 cores canaries then waited minutes for one (19 of 200 never Ready in 8 min; docs/scale.md)
            await stopped.wait(interval)
    finally:
        await state.close()  # no canary outlives its loop
        if namespace is not None:
            forget_service(namespace, name)  # a last pass may have published after the reconcile loop ended


def _unhealthy_nodes(reports: ChipReports) -> Callable[[], dict[str, str]]:
    """The nodes new engines keep off, node -> why (health/chips.py `keep_off`): those MindCluster takes out
    whole, those NodeD calls PreSeparate (MindCluster's scheduler places nothing new there), and those with a
    chip it separates once free that still counts allocatable (the successor of a drained pod would land
    right back on it)."""

    def unhealthy() -> dict[str, str]:
        now = time.time()
        return {r.node: why for r in reports.reports() if (why := keep_off(r, now=now)) is not None}

    return unhealthy


def _kept_off(memo: kopf.Memo) -> Callable[[], dict[str, str]] | None:
    """The fence: nodes MindCluster takes out (`_unhealthy_nodes`) and nodes that stopped reporting
    (clients/nodes.py: the successor of a pod given up for its lost node must not be placed back there);
    None when the operator reads neither."""
    reports, liveness = memo.get("chip_reports"), memo.get("node_liveness")
    if reports is None and liveness is None:
        return None
    faulty = _unhealthy_nodes(reports) if reports is not None else dict

    def kept_off() -> dict[str, str]:
        silent = liveness.silent(now=time.time()) if liveness is not None else {}
        return {**silent, **faulty()}

    return kept_off


def _node_facts(labels: NodeLabels) -> Callable[[], list[NodeFacts]]:
    """The nodes' device-plugin labels as render/fitness.py reads them."""

    def facts() -> list[NodeFacts]:
        return [
            NodeFacts(name=name, driver=have.get(DRIVER_VERSION_LABEL), chip=have.get(CHIP_NAME_LABEL), labels=have)
            for name, have in labels.labels()
        ]

    return facts
