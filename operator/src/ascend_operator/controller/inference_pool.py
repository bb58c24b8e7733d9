"""The reconcile step that keeps a service's InferencePool in step with its spec, and says so.

Why a step of its own: the pool is optional and lives in an API group the cluster may not serve. A
missing CRD, RBAC without the rule, a pool of the same name that someone else owns, or a pool the API
server rejects must each become an `InferencePoolReady=False` condition (and an event, through
`condition_events`) with the fix in its message, never a failed pass: the engines keep serving through
their Service whatever happens to routing.

What is decided is pure (`plan_pool`); `sync_inference_pool` only does the calls it asks for. The pool
carries a controller owner reference to the service, so garbage collection deletes it with the service;
turning routing off deletes it here (only a pool this service owns, by uid).
"""

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import kopf

from ascend_operator.api.constants import POOL_CRD
from ascend_operator.api.reasons import PoolReason, Relayed
from ascend_operator.api.status import INFERENCE_POOL_READY, AscendInferenceServiceStatus
from ascend_operator.clients.kube import ApiRefused, NotServed
from ascend_operator.clients.resources import POOL, Kube
from ascend_operator.controller.status import ConditionRecord
from ascend_operator.render.inferencepool import pool_name
from ascend_operator.render.pod import Owner

#: The chart value that grants the operator the inferencepools rule.
CHART_VALUE = "routing.inferencePool.enabled=true"


class PoolAction(StrEnum):
    """What to do with the pool."""

    CREATE = "Create"
    REPLACE_SPEC = "ReplaceSpec"
    NONE = "None"
    NOT_OWNED = "NotOwned"


def owned_by(obj: Mapping[str, Any], uid: str | None) -> bool:
    """Whether `obj` has a controller owner reference to the object with this uid."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return uid is not None and any(r.get("uid") == uid and r.get("controller") for r in refs)


def plan_pool(desired: Mapping[str, Any], current: Mapping[str, Any] | None, *, uid: str | None) -> PoolAction:
    """Create a missing pool, leave a foreign one alone, replace a drifted spec of our own."""
    if current is None:
        return PoolAction.CREATE
    if not owned_by(current, uid):
        return PoolAction.NOT_OWNED
    return PoolAction.NONE if current.get("spec") == desired["spec"] else PoolAction.REPLACE_SPEC


def accepted_by(current: Mapping[str, Any] | None) -> list[str]:
    """The parents (gateways) whose status entry says Accepted=True (GIE v1 InferencePoolStatus.parents,
    inferencepool_types.go:162-203; the condition type "Accepted", :230)."""
    accepted = []
    for parent in ((current or {}).get("status") or {}).get("parents") or []:
        conditions = {c.get("type"): c.get("status") for c in parent.get("conditions") or []}
        if conditions.get("Accepted") == "True":
            ref = parent.get("parentRef") or {}
            where = f"{ref['namespace']}/" if ref.get("namespace") else ""
            accepted.append(f"{ref.get('kind') or 'Gateway'} {where}{ref.get('name', '')}")
    return accepted


def _synced(desired: Mapping[str, Any], current: Mapping[str, Any] | None) -> ConditionRecord:
    spec = desired["spec"]
    labels = ",".join(f"{k}={v}" for k, v in spec["selector"]["matchLabels"].items())
    ref = spec["endpointPickerRef"]
    parents = accepted_by(current)
    accepted = f"; accepted by {', '.join(parents)}" if parents else "; no gateway has accepted it yet"
    return ConditionRecord(
        INFERENCE_POOL_READY,
        "True",
        PoolReason.SYNCED,
        f"InferencePool {desired['metadata']['name']} selects pods {labels} on port "
        f"{spec['targetPorts'][0]['number']}; endpoint picker Service {ref['name']}:{ref['port']['number']}" + accepted,
    )


def crd_missing(name: str) -> ConditionRecord:
    return ConditionRecord(
        INFERENCE_POOL_READY,
        "False",
        PoolReason.CRD_NOT_INSTALLED,
        f"InferencePool {name} cannot be created: the API server does not serve {POOL_CRD} (v1); install the "
        "Gateway API Inference Extension v1 CRDs. The engines still serve through their Service.",
    )


def _refused(exc: ApiRefused, name: str, namespace: str) -> ConditionRecord:
    if exc.status == 403:
        return ConditionRecord(
            INFERENCE_POOL_READY,
            "False",
            PoolReason.FORBIDDEN,
            f"the operator may not manage InferencePool {name} in {namespace} ({exc.message}); install the "
            f"chart with {CHART_VALUE}",
        )
    return ConditionRecord(
        INFERENCE_POOL_READY,
        "False",
        PoolReason.REJECTED,
        f"the API server rejected InferencePool {name}: {exc.message}",
    )


def previous_condition(previous: AscendInferenceServiceStatus | None) -> ConditionRecord | None:
    """The InferencePoolReady condition of the stored status, if any."""
    for cond in previous.conditions if previous is not None else []:
        if cond.type == INFERENCE_POOL_READY:
            return ConditionRecord(INFERENCE_POOL_READY, cond.status, Relayed(cond.reason), cond.message)
    return None


async def _remove(kube: Kube, owner: Owner) -> ConditionRecord | None:
    """Delete the pool this service owns (routing was turned off); None once nothing of ours is left, else
    the condition that keeps the removal pending for the next pass."""
    name = pool_name(owner)
    try:
        current = await kube.get(POOL, owner.namespace, name)
        if current is not None and owned_by(current, owner.uid):
            await kube.delete(POOL, owner.namespace, name, uid=current["metadata"]["uid"])
    except ApiRefused as exc:
        if exc.status == 403:
            return _refused(exc, name, owner.namespace)
    except kopf.TemporaryError as exc:
        return ConditionRecord(
            INFERENCE_POOL_READY, "Unknown", PoolReason.RETRYING, f"removing InferencePool {name}: {exc}"
        )
    return None


async def sync_inference_pool(
    kube: Kube, desired: Mapping[str, Any] | None, owner: Owner, previous: AscendInferenceServiceStatus | None
) -> Sequence[ConditionRecord]:
    """Make the cluster's pool what render/desired.py asks (None: routing is off, so none of ours); the
    condition to report (none when routing is off)."""
    if desired is None:
        if previous_condition(previous) is None:
            return ()  # routing was never on: no call to an API group that may not exist
        left = await _remove(kube, owner)
        return () if left is None else (left,)
    name = desired["metadata"]["name"]
    try:
        current = await kube.get(POOL, owner.namespace, name)
        action = plan_pool(desired, current, uid=owner.uid)
        if action is PoolAction.CREATE and not await kube.create(desired):
            # created by a racing pass or by someone else: judged on the next pass
            current = await kube.get(POOL, owner.namespace, name)
            if current is not None and not owned_by(current, owner.uid):
                action = PoolAction.NOT_OWNED
        elif action is PoolAction.REPLACE_SPEC:
            # the whole spec (a JSON patch `replace`), so no stale matchLabels key survives a merge
            replace = [{"op": "replace", "path": "/spec", "value": desired["spec"]}]
            await kube.patch(POOL, owner.namespace, name, replace)
    except NotServed:
        return (crd_missing(name),)
    except ApiRefused as exc:
        return (_refused(exc, name, owner.namespace),)
    except kopf.TemporaryError as exc:  # the API server did not answer: say so, retry on the next pass
        return (ConditionRecord(INFERENCE_POOL_READY, "Unknown", PoolReason.RETRYING, f"InferencePool {name}: {exc}"),)
    if action is PoolAction.NOT_OWNED:
        return (
            ConditionRecord(
                INFERENCE_POOL_READY,
                "False",
                PoolReason.NOT_OWNED,
                f"an InferencePool {name} exists in {owner.namespace} that this service does not own; the operator "
                "leaves it alone: delete it or rename the service",
            ),
        )
    return (_synced(desired, current),)
