"""The objects a service owns beside its pods (Service, PodDisruptionBudget, NetworkPolicy): one step.

Why one function: each of them is "read it; create it when missing; patch what drifted; delete ours when
the spec no longer wants one", and three copies of that had begun to differ (one announced its create,
one forgot to re-read what the cache lacked). The objects themselves come from render/; what counts as
drift is the kind's own function, passed in.
"""

from collections.abc import Callable, Mapping
from typing import Any

from ascend_operator.api.parse import ParsedService
from ascend_operator.clients.resources import NETWORK_POLICY, PDB, SERVICE, Kube, Resource
from ascend_operator.controller.memory import EventSink
from ascend_operator.render.group_pdb import build_group_pdb
from ascend_operator.render.lws import is_multi_node
from ascend_operator.render.netpol import OperatorPeer, build_network_policy, policy_name
from ascend_operator.render.pod import Owner, build_pdb, build_service, owned_by

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
    created: str = "",
    removed: str = "",
) -> None:
    """Make object `name` of kind `res` what `desired` says, or absent when it is None (only if this
    service owns it: never a user's). `created` / `removed` name the event announcing either, if any.
    A create that finds the object already there (the watch cache lacked it: its labels were edited away)
    reads it fresh, so the patch puts them back."""
    current = await kube.get(res, owner.namespace, name)
    if desired is None:
        if current is not None and owned_by(current, owner):
            await kube.delete(res, owner.namespace, name)
            if removed:
                events("Normal", removed, f"deleted {res.kind} {name}")
        return
    if current is None:
        if await kube.create(desired):
            if created:
                events("Normal", created, f"created {res.kind} {name}")
            return
        current = await kube.get(res, owner.namespace, name, fresh=True)
    if current is not None and (patch := drift(current, desired)):
        await kube.patch(res, owner.namespace, name, patch)


def _min_available(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Mapping[str, Any] | None:
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


def _service_drift(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return service_patch(dict(current), dict(desired)) or None


async def ensure_service(kube: Kube, events: EventSink, parsed: ParsedService, owner: Owner) -> None:
    """The engines' Service."""
    desired = build_service(parsed.spec, owner=owner)
    await ensure(kube, events, SERVICE, owner, owner.name, desired, drift=_service_drift)


async def ensure_pdb(kube: Kube, events: EventSink, parsed: ParsedService, owner: Owner) -> None:
    """The PodDisruptionBudget, counted in groups for a multi-node spec. One name for both, so a topology
    switch patches the budget in place (render/group_pdb.py)."""
    spec = parsed.spec
    desired = build_group_pdb(spec, owner=owner) if is_multi_node(spec) else build_pdb(spec, owner=owner)
    await ensure(
        kube, events, PDB, owner, owner.name, desired,
        drift=_min_available, created="DisruptionBudgetCreated", removed="DisruptionBudgetRemoved",
    )  # fmt: skip


async def ensure_network_policy(
    kube: Kube, events: EventSink, parsed: ParsedService, owner: Owner, *, operator: OperatorPeer
) -> None:
    """The NetworkPolicy admitting only the operator (and, by spec, clients) to the engine port."""
    desired = build_network_policy(parsed.spec, owner=owner, operator=operator)
    await ensure(kube, events, NETWORK_POLICY, owner, policy_name(owner), desired, drift=_whole_spec)
