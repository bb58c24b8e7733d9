"""How a service's plain objects are applied (Service, PodDisruptionBudget, NetworkPolicy, the router's):
one function, and each kind's drift rule.

Why one function: each of them is "read it; create it when missing; patch what drifted; delete ours when
the spec no longer wants one", and three copies of that had begun to differ (one announced its create,
one forgot to re-read what the cache lacked). The objects themselves come from render/; what counts as
drift is the kind's own function, passed in. Which objects, in which order: the rows of controller/steps.py.
"""

from collections.abc import Callable, Mapping
from typing import Any

from ascend_operator.api.constants import ANNOTATION_SPEC_HASH
from ascend_operator.api.reasons import EventReason
from ascend_operator.api.status import AscendInferenceServiceStatus, RouterStatus
from ascend_operator.clients.kube import ApiRefused
from ascend_operator.clients.resources import (
    DEPLOYMENT,
    NETWORK_POLICY,
    PDB,
    ROLE,
    ROLE_BINDING,
    SERVICE,
    SERVICE_ACCOUNT,
    Kube,
    Resource,
)
from ascend_operator.controller.service_state import EventSink
from ascend_operator.controller.status import whole
from ascend_operator.render.desired import Desired
from ascend_operator.render.netpol import policy_name
from ascend_operator.render.pod import Owner, engine_digest, owned_by
from ascend_operator.render.router import engine_slots, max_concurrent_requests, router_name

#: What to patch so that `current` matches `desired` (None: nothing drifted).
Drift = Callable[[Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any] | None]


async def ensure(
    kube: Kube,
    events: EventSink,
    res: Resource,
    owner: Owner,
    name: str,
    desired: Mapping[str, Any] | None,
    *,
    drift: Drift,
    created: EventReason | None = None,
    removed: EventReason | None = None,
) -> Mapping[str, Any] | None:
    """Make object `name` of kind `res` what `desired` says, or absent when it is None (only if this
    service owns it: never a user's). `created` / `removed` name the event announcing either, if any.
    A create that finds the object already there (the watch cache lacked it: its labels were edited away)
    reads it fresh, so the patch puts them back. Returns the object as read before any write (None when
    there was none), whose status is the freshest this pass has."""
    current = await kube.get(res, owner.namespace, name)
    if desired is None:
        if current is not None and owned_by(current, owner):
            await kube.delete(res, owner.namespace, name)
            if removed is not None:
                events("Normal", removed, f"deleted {res.kind} {name}")
        return current
    if current is None:
        if await kube.create(desired):
            if created is not None:
                events("Normal", created, f"created {res.kind} {name}")
            return None
        current = await kube.get(res, owner.namespace, name, fresh=True)
    if current is not None and (patch := drift(current, desired)):
        await kube.patch(res, owner.namespace, name, patch)
    return current


def min_available(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Mapping[str, Any] | None:
    want = desired["spec"]["minAvailable"]
    return None if (current.get("spec") or {}).get("minAvailable") == want else {"spec": {"minAvailable": want}}


def _whole_spec(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return None if current.get("spec") == desired["spec"] else {"spec": desired["spec"]}


def service_patch(current: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """The strategic-merge patch that brings a live Service to what the spec asks; {} when it matches.

    Only what the operator decides is compared: selector, ports, type and the spec's annotations (an
    annotation removed from the spec stays on the Service; others' annotations are never touched).
    """
    want = {k: desired["spec"][k] for k in ("selector", "ports", "type")}
    have = {k: current.get("spec", {}).get(k) for k in ("selector", "ports", "type")}
    patch: dict[str, Any] = {}
    if {**have, "ports": _ports(have["ports"])} != want:
        patch["spec"] = want
    annotations = desired["metadata"].get("annotations") or {}
    live = (current.get("metadata") or {}).get("annotations") or {}
    if any(live.get(k) != v for k, v in annotations.items()):
        patch["metadata"] = {"annotations": annotations}
    return patch


def _ports(ports: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Live ports without what the API server adds (a NodePort's nodePort)."""
    if ports is None:
        return None
    return [{k: v for k, v in p.items() if k in ("name", "port", "targetPort", "protocol")} for p in ports]


def service_drift(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return service_patch(dict(current), dict(desired)) or None


async def ensure_network_policy(kube: Kube, events: EventSink, desired: Desired) -> None:
    """The NetworkPolicy admitting only the operator (and, by spec, clients) to the engine port."""
    owner = desired.owner
    await ensure(kube, events, NETWORK_POLICY, owner, policy_name(owner), desired.network_policy, drift=_whole_spec)


def _hashed(desired: Mapping[str, Any]) -> dict[str, Any]:
    """`desired` with a digest of its spec in an annotation: the API server fills a Deployment's spec with
    defaults, so the live spec never equals the rendered one, but the digest does until the spec changes."""
    meta = dict(desired["metadata"])
    meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_SPEC_HASH: engine_digest(desired["spec"])}
    return {**desired, "metadata": meta}


def hashed_drift(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Mapping[str, Any] | None:
    have = ((current.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_SPEC_HASH)
    want = desired["metadata"]["annotations"][ANNOTATION_SPEC_HASH]
    return (
        None if have == want else {"metadata": {"annotations": {ANNOTATION_SPEC_HASH: want}}, "spec": desired["spec"]}
    )


def _no_drift(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return None  # a ServiceAccount or RoleBinding carries nothing the spec can change


def _rules(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return None if current.get("rules") == desired["rules"] else {"rules": desired["rules"]}


#: The router's objects by kind, in creation order (identity and rights before the pods that use them),
#: and what of each is compared with the live object.
_ROUTER_KINDS: tuple[tuple[Resource, Drift], ...] = (
    (SERVICE_ACCOUNT, _no_drift),
    (ROLE, _rules),
    (ROLE_BINDING, _no_drift),
    (DEPLOYMENT, hashed_drift),
    (SERVICE, service_drift),
    (PDB, _whole_spec),
)


def router_status(desired: Desired, deployment: Mapping[str, Any] | None) -> RouterStatus | None:
    """The router's part of the status: its pods as the Deployment counts them and the rendered limits."""
    router = desired.spec.router
    if router is None:
        return None
    target = desired.router_target
    return RouterStatus(
        service=router_name(desired.owner),
        replicas=router.replicas,
        ready_replicas=int(((deployment or {}).get("status") or {}).get("readyReplicas") or 0),
        max_concurrent_requests=max_concurrent_requests(router, target) * router.replicas,
        queue_size=router.admission.queue_size * router.replicas,
        queue_timeout_seconds=router.admission.queue_timeout_seconds,
        engine_slots=engine_slots(target),
    )


def router_extra(
    router: RouterStatus | None, previous: AscendInferenceServiceStatus | None
) -> AscendInferenceServiceStatus:
    """The status field `router`: set while there is one; cleared (null) only where the stored status has one,
    so a service without a router writes nothing for it."""
    if router is not None:
        return AscendInferenceServiceStatus(router=whole(router))
    had = previous is not None and previous.router is not None
    return AscendInferenceServiceStatus(router=None) if had else AscendInferenceServiceStatus()


async def ensure_router(kube: Kube, events: EventSink, desired: Desired) -> RouterStatus | None:
    """spec.router's objects, or their removal (ours only) when it is absent; the router's status."""
    router, owner = desired.spec.router, desired.owner
    if router is None and await kube.get(PDB, owner.namespace, router_name(owner)) is None:
        return None  # never had one (the budget is watch-cached: no API call), or removed: nothing to ask for
    wanted = {o["kind"]: _hashed(o) if o["kind"] == DEPLOYMENT.kind else o for o in desired.router}
    # removal: the budget last, since its absence is what says "nothing left" to the next pass
    kinds = _ROUTER_KINDS if router is not None else (*reversed(_ROUTER_KINDS[:-1]), _ROUTER_KINDS[-1])
    seen: dict[str, Mapping[str, Any] | None] = {}
    try:
        for res, drift in kinds:
            deployment = res is DEPLOYMENT  # the one object of the router announced
            seen[res.kind] = await ensure(
                kube, events, res, owner, router_name(owner), wanted.get(res.kind), drift=drift,
                created=EventReason.ROUTER_CREATED if deployment else None,
                removed=EventReason.ROUTER_REMOVED if deployment else None,
            )  # fmt: skip
    except ApiRefused as exc:  # the engines serve on through their own Service; the user is told the fix
        if exc.status != 403:
            raise
        fix = "install the chart with router.enabled=true"
        events(
            "Warning",
            EventReason.ROUTER_FORBIDDEN,
            f"the operator may not manage {res.kind} {router_name(owner)}: {fix}",
        )
    return router_status(desired, seen.get(DEPLOYMENT.kind))
