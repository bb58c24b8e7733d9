"""A reconcile pass as rows: each row is one idempotent step and the objects it owns (KubeRay's ordered list
of reconcile functions), walked in order by the pass (controller/reconcile.py) and by `aisctl render`.

Why rows: render and the operator had grown two paths, and an owned kind was a builder, a `Desired` piece,
an entry in render's list and a call in the pass, four places that had to agree. Now a row names what it
owns as render prints it (`objects`) and how a pass applies it (`apply`), so render walks exactly the rows
the pass walks, in the same order; a plain object (read, create when missing, patch what drifted, delete
ours when the spec no longer wants one) is one `owned(...)` row beside its kind's `Resource` row
(clients/resources.py, which gives it its RBAC and watch cache) and its builder in render/.

What the steps see goes into the `Pass` (the pods after the engines step, the router's status, the role
services, the InferencePool's condition); the status is then computed from it, purely (controller/status.py).
"""

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ascend_operator.api.parse import ParsedService
from ascend_operator.api.reasons import EventReason
from ascend_operator.api.status import AscendInferenceServiceStatus
from ascend_operator.clients.resources import PDB, SERVICE, Resource, service_pods
from ascend_operator.controller.context import Context
from ascend_operator.controller.disaggregation import Pair, ensure_roles, had_roles, observe_pair
from ascend_operator.controller.engines import guarded_apply
from ascend_operator.controller.inference_pool import sync_inference_pool
from ascend_operator.controller.laps import Laps
from ascend_operator.controller.operator_metrics import publish_router
from ascend_operator.controller.owned import Drift, ensure, ensure_router, min_available, router_extra, service_drift
from ascend_operator.controller.rollout import Rollout, keep_revision
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.controller.status import ConditionRecord, overlay
from ascend_operator.controller.views import PodView, pod_view
from ascend_operator.render.desired import Desired
from ascend_operator.render.pod import Owner

Body = Mapping[str, Any]


@dataclass(kw_only=True)
class Pass:
    """One pass of one service: what its steps are given, and what they saw on the way."""

    ctx: Context
    parsed: ParsedService
    desired: Desired
    memory: ServiceMemory
    before: AscendInferenceServiceStatus | None
    """The status as stored, read through the model once per pass."""
    pods: list[PodView]
    """The service's pods; re-read after the engines step when it acted."""
    laps: Laps
    """The pass's stopwatch: each row is a lap (controller/laps.py), so a slow pass says which row held it."""
    rollout: Rollout | None = None
    extra: AscendInferenceServiceStatus = field(default_factory=AscendInferenceServiceStatus)
    """Status fields the steps add (the router's, the rollout's)."""
    conditions: list[ConditionRecord] = field(default_factory=list)
    """Conditions the steps decide (InferencePoolReady, the rollout's)."""
    pair: Pair | None = None
    """A P/D parent's roles as the pass left them."""


@dataclass(frozen=True, kw_only=True)
class Step:
    """One row: a name (logs, CONTRIBUTING), what it owns as `aisctl render` prints it, and how a pass
    applies it. `apply` is idempotent: a second pass, or one after a crash half-way, changes nothing more."""

    name: str
    objects: Callable[[Desired], Sequence[Body]]
    apply: Callable[[Pass], Awaitable[None]]


def _present(*objects: Body | None) -> list[Body]:
    return [o for o in objects if o is not None]


def owned(
    res: Resource,
    piece: Callable[[Desired], Body | None],
    *,
    drift: Drift,
    name: Callable[[Owner], str] = lambda owner: owner.name,
    created: EventReason | None = None,
    removed: EventReason | None = None,
) -> Step:
    """The row of a plain owned object: `piece` builds it from the spec (None: the spec wants none, and one
    this service owns is deleted), `drift` says what to patch on a live one (controller/owned.py `ensure`),
    `created` / `removed` the events announcing either."""

    async def apply(p: Pass) -> None:
        owner = p.desired.owner
        await ensure(p.ctx.kube, p.ctx.events, res, owner, name(owner), piece(p.desired), drift=drift,
                     created=created, removed=removed)  # fmt: skip

    return Step(name=res.kind, objects=lambda d: _present(piece(d)), apply=apply)


async def _engines(p: Pass) -> None:
    """The NetworkPolicy and, beside it, the pods or the LeaderWorkerSet (controller/engines.py); a new
    service's pods wait for no other API call (issue 14)."""
    if await guarded_apply(p.ctx, p.desired, p.pods, p.memory, p.rollout):
        owner = p.desired.owner
        p.pods = [pod_view(o) for o in await service_pods(p.ctx.kube, owner.namespace, owner.name)]


async def _revision(p: Pass) -> None:
    """The spec's ControllerRevision, after the pods (controller/rollout.py); not a rendered object."""
    if p.rollout is not None:
        await keep_revision(p.ctx.kube, p.desired, p.rollout, p.memory)


async def _router(p: Pass) -> None:
    """spec.router's objects (controller/owned.py `ensure_router`) and the router's part of the status."""
    router = await ensure_router(p.ctx.kube, p.ctx.events, p.desired)
    publish_router(p.desired.owner.namespace, p.desired.owner.name, router)
    p.extra = overlay(p.extra, router_extra(router, p.before))


async def _roles(p: Pass) -> None:
    """A P/D split's role services (controller/disaggregation.py), or their removal once it is gone."""
    if p.parsed.spec.disaggregation is not None or had_roles(p.before):
        roles = await ensure_roles(p.ctx.kube, p.ctx.events, p.desired)
        p.pair = observe_pair(p.parsed, p.desired.owner, roles)


async def _inference_pool(p: Pass) -> None:
    """After the engines: routing trouble never delays one (controller/inference_pool.py)."""
    p.conditions += await sync_inference_pool(p.ctx.kube, p.desired.inference_pool, p.desired.owner, p.before)


def _engine_objects(d: Desired) -> list[Body]:
    engines = d.groups()
    return _present(d.network_policy, *([engines] if engines is not None else d.pods()))


#: The steps of a pass over a valid spec, in order; `aisctl render` prints their objects in this order.
STEPS: tuple[Step, ...] = (
    Step(name="engines", objects=_engine_objects, apply=_engines),
    Step(name="revision", objects=lambda d: (), apply=_revision),
    owned(SERVICE, lambda d: d.service, drift=service_drift),
    owned(PDB, lambda d: d.budget, drift=min_available,
          created=EventReason.DISRUPTION_BUDGET_CREATED, removed=EventReason.DISRUPTION_BUDGET_REMOVED),
    Step(name="router", objects=lambda d: d.router, apply=_router),
    Step(name="roles", objects=lambda d: d.roles, apply=_roles),
    Step(name="InferencePool", objects=lambda d: _present(d.inference_pool), apply=_inference_pool),
)  # fmt: skip


async def walk(p: Pass) -> None:
    """Apply every row in order; an error stops the pass (kopf retries it), leaving what is done done."""
    for step in STEPS:
        await step.apply(p)
        p.laps.lap(step.name)
    if p.rollout is not None:  # the revisions and the last rollout (controller/rollout.py)
        p.extra = overlay(p.extra, p.rollout.extra)
        p.conditions += [p.rollout.condition] if p.rollout.condition is not None else []


def rendered(desired: Desired) -> list[dict[str, Any]]:
    """Everything that exists once the operator has reconciled the service and what it made: the rows'
    objects in order, then each role service's (a role service is reconciled by a pass of its own)."""
    own = [dict(o) for step in STEPS for o in step.objects(desired)]
    return [*own, *(o for role in desired.role_desired() for o in rendered(role))]
