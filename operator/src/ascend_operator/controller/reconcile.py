"""One reconcile pass of one AscendInferenceService: ordered, idempotent steps (KubeRay's style).

1. parse and validate the spec (errors become a condition and an event; existing pods are left serving);
2. plan the rollout (which revision the pods follow: controller/rollout.py);
3. walk the rows of controller/steps.py, in order: the engines (the NetworkPolicy and, beside it, the pods
   or one LeaderWorkerSet, whose stale, excess and duplicate pods go to the disruption step with its one
   budget and drain: controller/engines.py, controller/deletions.py), the spec's ControllerRevision, the
   Service, the PodDisruptionBudget, the router, a P/D split's role services, the InferencePool; render
   prints the same rows' objects;
4. compute the status from what the steps saw (reading the pods' FailedMount events when a pod is stuck
   before its containers) and patch it only when it changed; announce condition transitions as events.
Running a pass twice, or after a crash half-way, converges to the same state: pod names are stable and
every create or delete tolerates "already done".
"""

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ascend_operator.api.constants import LABEL_SERVICE
from ascend_operator.api.parse import ParsedService, SpecError, parse_resource
from ascend_operator.api.reasons import Relayed
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.api.status import AscendInferenceServiceStatus
from ascend_operator.clients.resources import EVENT, SERVICE_CR, service_pods
from ascend_operator.controller.causes import FAILED_MOUNT_EVENTS, may_fail_mount, mount_failures
from ascend_operator.controller.context import Context
from ascend_operator.controller.disaggregation import Pair
from ascend_operator.controller.groups import group_status
from ascend_operator.controller.inference_pool import previous_condition
from ascend_operator.controller.laps import Laps
from ascend_operator.controller.operator_metrics import publish_conditions
from ascend_operator.controller.rollout import Rollout, plan_rollout
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.controller.status import Observed, compute_status, condition_events, overlay, status_due
from ascend_operator.controller.steps import Pass, walk
from ascend_operator.controller.views import PodView, pod_view, stored_status
from ascend_operator.render.desired import Desired, Placement
from ascend_operator.render.fitness import allowed_versions, asks_placement, fenced, unfit
from ascend_operator.render.lws import group_spec_hash, is_multi_node
from ascend_operator.render.pod import Owner, scale_selector, service_url, spec_hash
from ascend_operator.validation import Severity, SpecFinding, validate_spec

#: Context is the pass's injected I/O (controller/context.py), imported from here by the handlers and tests.
__all__ = ["Context", "reconcile"]


def _driver_versions(ctx: Context, spec: AscendInferenceServiceSpec) -> tuple[str, ...] | None:
    """The cluster's driver versions that meet spec.runtime.minDriverVersion (render/fitness.py)."""
    return allowed_versions(spec, ctx.nodes()) if ctx.nodes is not None else None


def _unhealthy(ctx: Context) -> Mapping[str, str]:
    return ctx.unhealthy_nodes() if ctx.unhealthy_nodes is not None else {}


def _explain_unfit(ctx: Context, spec: AscendInferenceServiceSpec, pods: list[PodView]) -> list[PodView]:
    """Pending pods whose spec.runtime requirement no node meets say which one, and what the nodes have,
    before the scheduler's own message (which says only that no node matched the affinity); pods kept off
    nodes MindCluster took out say which and why."""
    if (fence := fenced(_unhealthy(ctx))) is not None and spec.parallelism.nodes == 1:
        pods = _prefixed(pods, fence)
    if not asks_placement(spec):
        return pods
    if ctx.nodes is None and spec.runtime.min_driver_version is not None:
        why: str | None = (
            "spec.runtime.minDriverVersion needs the operator to read the nodes' driver versions "
            "(aisctl operator --npu-faults; the chart's npuFaults.enabled)"
        )
    elif ctx.nodes is None:  # nothing known of the nodes: the scheduler's own message stands
        return pods
    else:
        why = unfit(spec, ctx.nodes())
    return pods if why is None else _prefixed(pods, why)


def _prefixed(pods: list[PodView], why: str) -> list[PodView]:
    """Unschedulable pods' messages with `why` before the scheduler's."""
    return [replace(p, unschedulable=f"{why}; scheduler: {p.unschedulable}") if p.unschedulable else p for p in pods]


def _findings(body: Mapping[str, Any]) -> tuple[ParsedService | None, list[SpecFinding]]:
    try:
        parsed = parse_resource(body)
    except SpecError as exc:
        return None, [
            SpecFinding(severity=Severity.ERROR, field="spec", rule="Schema", message=p) for p in exc.problems
        ]
    return parsed, validate_spec(parsed.spec)


def _raw_replicas(body: Mapping[str, Any]) -> int:
    """spec.replicas of a spec that did not parse, for the status only."""
    raw = (body.get("spec") or {}).get("replicas", 1)
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else 0


async def _key_version(ctx: Context, parsed: ParsedService, namespace: str) -> str | None:
    """The resourceVersion of the service's API-key Secret; None without a key or when it cannot be read."""
    ref = parsed.spec.auth.api_key_secret_ref
    if ref is None or ctx.keys is None:
        return None
    key = await ctx.keys.get(namespace, ref)
    return key.version if key is not None else None


def _desired(ctx: Context, parsed: ParsedService, owner: Owner, key_version: str | None) -> Desired:
    """Every object of the service as this pass builds them (render/desired.py, what `aisctl render`
    prints), with what the operator read of the cluster: the key's version, the nodes' driver versions
    (once per pass, not per pod), the nodes MindCluster took out."""
    placement = Placement(
        npu_resource=ctx.npu_resource,
        operator=ctx.operator,
        key_version=key_version,
        driver_versions=_driver_versions(ctx, parsed.spec),
        avoid_nodes=tuple(sorted(_unhealthy(ctx))),
    )
    return Desired(spec=parsed.spec, owner=owner, placement=placement)


def _served_pods(parsed: ParsedService | None, pods: list[PodView]) -> list[PodView]:
    """The pods that stand for replicas in the status: every single-node pod, or each group's leader."""
    if parsed is not None and is_multi_node(parsed.spec):
        return [p for p in pods if p.worker_index == 0]
    return pods


def _with_groups(
    parsed: ParsedService | None, pods: list[PodView], extra: AscendInferenceServiceStatus
) -> AscendInferenceServiceStatus:
    """The health loop's status fields, plus `groups` for a multi-node service."""
    if parsed is None or not is_multi_node(parsed.spec):
        return extra
    return overlay(extra, AscendInferenceServiceStatus(groups=group_status(pods, size=parsed.spec.parallelism.nodes)))


def _current_hash(spec: AscendInferenceServiceSpec, key_version: str | None, rollout: Rollout | None = None) -> str:
    # the key's Secret version rolls single-node pods; LWS groups keep their own template hash; a rollout
    # that holds on the current revision (rolled back, or judging one pod) counts against that revision
    if rollout is not None:
        return spec_hash(rollout.target.engines, key_version=key_version)
    return group_spec_hash(spec) if is_multi_node(spec) else spec_hash(spec, key_version=key_version)


async def reconcile(
    body: Mapping[str, Any], ctx: Context, memory: ServiceMemory, *, laps: Laps | None = None
) -> dict[str, Any]:
    """One pass; returns the status it computed. `laps` times its phases (the caller logs a slow pass's)."""
    laps = laps if laps is not None else Laps(clock=ctx.mono)
    laps.start()
    meta = body["metadata"]
    owner = Owner(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"])
    generation = meta.get("generation")
    parsed, findings = _findings(body)
    laps.lap("spec")
    errors = [f"{f.field}: {f.message}" for f in findings if f.severity is Severity.ERROR]
    if memory.announced_generation != generation:
        memory.announced_generation = generation
        for f in findings:
            if f.severity is not Severity.NOTE:
                ctx.events("Warning", Relayed(f.rule), f"{f.field}: {f.message}")

    pods = [pod_view(p) for p in await service_pods(ctx.kube, owner.namespace, owner.name)]
    laps.lap("pods")
    deleting = meta.get("deletionTimestamp") is not None  # garbage collection takes the children
    previous = memory.previous(body.get("status"))  # as stored: what a patch is compared with (`status_due`)
    before = stored_status({"metadata": meta, "status": previous})  # the same, read through the model
    # An invalid spec or a deletion keeps the pool (and its condition) as they were.
    conditions = [c for c in (previous_condition(before),) if c is not None]
    pair: Pair | None = None
    rollout: Rollout | None = None
    extra = overlay(AscendInferenceServiceStatus(), memory.live)
    key_version = await _key_version(ctx, parsed, owner.namespace) if parsed is not None and not errors else None
    laps.lap("api key")
    if parsed is not None and not errors and not deleting:
        desired = _desired(ctx, parsed, owner, key_version)  # a P/D split's engines are its roles'
        rollout = await plan_rollout(
            ctx.kube,
            ctx.events,
            desired,
            raw_spec=body["spec"],
            pods=pods,
            previous=before,
            memory=memory,
            now=ctx.now(),
        )
        laps.lap("rollout")
        seen = Pass(ctx=ctx, parsed=parsed, desired=desired, memory=memory, before=before, pods=pods,
                    rollout=rollout, extra=extra, laps=laps)  # fmt: skip
        await walk(seen)  # the rows of controller/steps.py, in order: engines first
        pods, extra, conditions, pair = seen.pods, seen.extra, seen.conditions, seen.pair

    failures: dict[str, str] = {}
    if any(may_fail_mount(p) for p in pods):  # read events only when a pod is stuck before its containers
        failures = mount_failures(await ctx.kube.list(EVENT, owner.namespace, fields=FAILED_MOUNT_EVENTS), pods)
        laps.lap("mount events")
    valid = parsed is not None and not errors
    if parsed is not None:
        pods = _explain_unfit(ctx, parsed.spec, pods)
    observed = Observed(
        generation=generation,
        replicas=parsed.spec.replicas if parsed else _raw_replicas(body),
        spec_hash=_current_hash(parsed.spec, key_version, rollout) if parsed and valid else None,
        pods=_served_pods(parsed, pods),
        service=owner.name,
        endpoint=service_url(parsed.spec, owner) if parsed and valid else None,
        errors=errors,
        mount_failures=failures,
        create_failures=memory.create_failures,
        health=memory.pod_faults,
        extra=_with_groups(parsed, pods, extra),
        overrides=memory.overrides,
        selector=scale_selector(parsed.spec, owner) if parsed else f"{LABEL_SERVICE}={owner.name}",
        extra_conditions=[*conditions, *([memory.autoscale_condition] if memory.autoscale_condition else [])],
    )
    status = compute_status(pair.observed(observed) if pair else observed, previous=before, now=ctx.now())
    publish_conditions(owner.namespace, owner.name, status["conditions"])
    laps.lap("status")
    now = ctx.mono()
    if status_due(previous, status, live_written_at=memory.live_written_at, now=now, live_interval=ctx.live_interval):
        await ctx.kube.patch(SERVICE_CR, owner.namespace, owner.name, {"status": status}, status=True)
        memory.live_written_at, memory.written = now, status
        for event in condition_events(before, status):
            ctx.events(*event)
        laps.lap("status patch")
    return status
