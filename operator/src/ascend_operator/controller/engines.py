"""Steps 2 and 3 of a reconcile pass: the engines (plain pods, or one LeaderWorkerSet for a multi-node
spec) and the NetworkPolicy that guards them, made concurrently and failing closed.

Why a module of its own: these steps are what a pass does to the engines, with their own failure rule
(a policy that cannot be made takes the pods this pass created with it); the pass itself
(controller/reconcile.py) only orders the steps and computes the status.
"""

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

from ascend_operator.api.constants import ANNOTATION_SPEC_HASH
from ascend_operator.api.reasons import EventReason
from ascend_operator.clients.kube import ApiRefused
from ascend_operator.clients.resources import LWS, POD, service_pods
from ascend_operator.controller.context import Context
from ascend_operator.controller.deletions import Site, disrupt, observe_groups
from ascend_operator.controller.groups import plan_groups, plan_pods_beside_groups
from ascend_operator.controller.owned import ensure_network_policy
from ascend_operator.controller.plan import CreatePod, DeletePod, plan_pods
from ascend_operator.controller.rollout import Rollout
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.controller.views import PodView
from ascend_operator.disruption import Candidate, RollReason
from ascend_operator.render.desired import Desired
from ascend_operator.render.lws import lws_name
from ascend_operator.render.netpol import policy_name
from ascend_operator.render.pod import Owner, spec_hash

T = TypeVar("T")


async def _create_pod(ctx: Context, memory: ServiceMemory, body: Mapping[str, Any], digest: str) -> None:
    """Create one pod; a refusal (ResourceQuota, admission, Pod Security) goes to the status with the API
    server's message, and is one event per distinct message rather than one per retry."""
    name = body["metadata"]["name"]
    try:
        if await ctx.kube.create(body):
            ctx.events("Normal", EventReason.POD_CREATED, f"created pod {name} (spec {digest})")
    except ApiRefused as exc:
        memory.create_failures[name] = exc.message
        if exc.message not in memory.announced_failures:
            memory.announced_failures.add(exc.message)
            ctx.events("Warning", EventReason.POD_CREATE_FAILED, f"creating pod {name}: {exc.message}")
        return
    memory.announced_failures.clear()


async def _apply_pod_actions(
    ctx: Context,
    desired: Desired,
    pods: list[PodView],
    memory: ServiceMemory,
    *,
    replicas: int,
    more: Sequence[Candidate] = (),
    rollout: Rollout | None = None,
) -> bool:
    """Create missing replicas; hand deletion candidates (with `more`, a switch's groups) to the disruption
    step. True when anything was done. With a `rollout`, pods follow its target revision, and the one judged
    pod is rendered from the updated one (controller/rollout.py)."""
    spec = desired.engines
    target = rollout.target if rollout is not None else desired
    digest = spec_hash(target.engines, key_version=desired.placement.key_version)
    memory.create_failures = {}
    actions = plan_pods(replicas=replicas, spec_hash=digest, pods=pods, in_flight=memory.in_flight)
    judged = rollout.creates(pods) if rollout is not None else None
    for action in actions:
        if isinstance(action, CreatePod):
            made, judged = judged or target, None  # at most one pod on a judged revision
            body = made.pod(action.replica)
            await _create_pod(ctx, memory, body, body["metadata"]["annotations"][ANNOTATION_SPEC_HASH])
    candidates = [
        Candidate(pod=a.name, uid=a.uid, reason=a.reason, message=f"{a.reason.value} (spec {digest})")
        for a in actions
        if isinstance(a, DeletePod)
    ]
    if rollout is not None:
        candidates = rollout.candidates(candidates, pods, replicas=replicas)
    decision = await disrupt(
        site_of(ctx, desired.owner), memory, spec, source="reconcile", candidates=[*candidates, *more]
    )
    return any(isinstance(a, CreatePod) for a in actions) or decision.action is not None


def site_of(ctx: Context, owner: Owner) -> Site:
    return Site(kube=ctx.kube, events=ctx.events, namespace=owner.namespace, service=owner.name, clock=ctx.clock)


async def _apply_group(ctx: Context, desired: Desired, pods: list[PodView], memory: ServiceMemory) -> bool:
    """Multi-node: make the LeaderWorkerSet match the spec (LWS rolls the groups within spec.rollout); the
    set grows as single-node pods left by a one-node spec make way for it, and shrinks only when the
    disruption decision removed a group (controller/groups.py). True when anything was done."""
    spec, owner = desired.engines, desired.owner
    lws = desired.groups()
    assert lws is not None
    name = lws["metadata"]["name"]
    digest = lws["metadata"]["annotations"][ANNOTATION_SPEC_HASH]
    current = await ctx.kube.get(LWS, owner.namespace, name)
    have_replicas = None if current is None else (current.get("spec") or {}).get("replicas")
    plan = plan_groups(
        replicas=spec.replicas,
        nodes=spec.parallelism.nodes,
        npus=spec.npus,
        pods=pods,
        current=have_replicas if isinstance(have_replicas, int) else None,
    )
    lws["spec"]["replicas"] = plan.lws_replicas
    acted = False
    site = site_of(ctx, owner)
    if current is not None:
        await observe_groups(site, memory, current, pods)
    if current is None:
        if await ctx.kube.create(lws):
            ctx.events("Normal", EventReason.GROUPS_CREATED, f"created LeaderWorkerSet {name} (spec {digest})")
        acted = True
    else:
        have_hash = ((current.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_SPEC_HASH)
        if have_hash != digest or have_replicas != plan.lws_replicas:
            patch = {"metadata": {"annotations": lws["metadata"]["annotations"]}, "spec": lws["spec"]}
            await ctx.kube.patch(LWS, owner.namespace, name, patch)
            ctx.events(
                "Normal",
                EventReason.GROUPS_UPDATED,
                f"updated LeaderWorkerSet {name} (spec {digest}, {plan.lws_replicas} groups)",
            )
            acted = True
    decision = await disrupt(site, memory, spec, source="reconcile", candidates=plan.candidates)
    return acted or decision.action is not None


async def _apply(
    ctx: Context, desired: Desired, pods: list[PodView], memory: ServiceMemory, rollout: Rollout | None = None
) -> bool:
    """Plain pods or one LeaderWorkerSet, by spec.parallelism.nodes; True when anything was done. Groups
    of an earlier multi-node spec make way for single-node pods one budgeted decision at a time."""
    if desired.multi_node:
        return await _apply_group(ctx, desired, pods, memory)
    owner, replicas = desired.owner, desired.engines.replicas
    plain = [p for p in pods if p.worker_index is None]
    if len(plain) == len(pods):
        return await _apply_pod_actions(ctx, desired, plain, memory, replicas=replicas, rollout=rollout)
    plan = plan_pods_beside_groups(replicas=replicas, pods=pods)
    # no group serves: removing the set costs nothing
    if plan.remove_set and await ctx.kube.delete(LWS, owner.namespace, lws_name(owner), foreground=True):
        ctx.events("Normal", RollReason.SPEC_CHANGED, f"deleted LeaderWorkerSet {lws_name(owner)}: no group serves")
    more = plan.candidates
    return await _apply_pod_actions(ctx, desired, plain, memory, replicas=plan.replicas, more=more)


async def _withdraw(ctx: Context, owner: Owner, *, known: set[str], cause: BaseException) -> None:
    """Delete the pods this pass created (those not in `known`): their NetworkPolicy could not be made."""
    said = cause.message if isinstance(cause, ApiRefused) else str(cause)
    for pod in await service_pods(ctx.kube, owner.namespace, owner.name):
        meta = pod["metadata"]
        if meta["uid"] not in known and meta.get("deletionTimestamp") is None:
            await ctx.kube.delete(POD, owner.namespace, meta["name"], uid=meta["uid"])
            why = f"deleted pod {meta['name']}: its NetworkPolicy {policy_name(owner)} could not be made: {said}"
            ctx.events("Warning", EventReason.NETWORK_POLICY_FAILED, why)


async def _settled(step: Awaitable[T]) -> T | Exception:
    """What `step` returned, or the error it raised (as `asyncio.gather(return_exceptions=True)`)."""
    try:
        return await step
    except Exception as exc:
        return exc


async def guarded_apply(
    ctx: Context, desired: Desired, pods: list[PodView], memory: ServiceMemory, rollout: Rollout | None = None
) -> bool:
    """The NetworkPolicy and the pod actions, concurrently: a new service's pod waits for one API write,
    not two. Fail closed all the same: when the policy cannot be made, the pods this pass created are
    deleted (an engine listens only after its weights load, minutes after the create, so none served
    unguarded), and later passes make the policy first until it exists, so a refused policy costs one
    pod, not one per retry. A multi-node spec's groups come from a LeaderWorkerSet, not from pods this
    pass can name: the policy goes first there. True when anything was done."""
    owner = desired.owner
    if memory.policy_failed or desired.multi_node:
        await ensure_network_policy(ctx.kube, ctx.events, desired)
        memory.policy_failed = False
        return await _apply(ctx, desired, pods, memory, rollout)
    # the pods in this task, the policy in a task beside it: the pod create goes to the API client at
    # once, while a new task waits its turn behind the whole loop (at 200 services on 2 cores the policy
    # task that a gather started first delayed the pod create by 2-26 ms; docs/scale.md)
    guard = asyncio.create_task(ensure_network_policy(ctx.kube, ctx.events, desired), name=f"policy {owner.name}")
    try:
        applied = await _settled(_apply(ctx, desired, pods, memory, rollout))
        policy = await _settled(guard)
    finally:
        guard.cancel()  # a no-op once it is done; a cancelled pass leaves no policy create behind
    if isinstance(policy, BaseException):
        memory.policy_failed = True
        await _withdraw(ctx, owner, known={p.uid for p in pods}, cause=policy)
        raise policy
    if isinstance(applied, BaseException):
        raise applied
    return applied
