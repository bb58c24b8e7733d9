"""A disaggregated service's pass: its two role services kept as the spec renders them, and its status
computed from theirs.

Why the parent judges nothing itself: each role is a whole service (api/disaggregation.py), whose own loops
run the canary, the detectors, the budget and the rolls of its pods; the parent's job is to keep the two
specs in line with its own (a `kubectl scale` on the parent reaches both roles, ratio kept) and to say, in
its conditions, whether the pair serves: a disaggregated service serves only while both roles do. The
parent's own engine pods, left from an aggregated spec, are scaled to zero through the usual budgeted path
(reconcile.py) before or while the roles come up.

With spec.autoscaling, each role decides on its own signals and publishes the engines it wants in its
status.autoscaling (controller/autoscaling.py); the parent reads both, keeps them within the user's
decode-per-prefill ratio (autoscale/disaggregation.py) and writes each role's spec.replicas, and its status lists
both pools' decisions (roles[].autoscaling). A role's engines then follow the autoscaler, not spec.replicas x
pool.replicas (that is only where a new role starts).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ascend_operator.api.autoscaling import AutoscalingStatus, ScaleReason
from ascend_operator.api.constants import LABEL_SERVICE
from ascend_operator.api.disaggregation import PdRole
from ascend_operator.api.parse import ParsedService, SpecError, parse_spec
from ascend_operator.api.reasons import (
    AvailableReason,
    DegradedReason,
    EventReason,
    ProgressingReason,
    ReadyReason,
    Relayed,
)
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.api.status import (
    AVAILABLE,
    DEGRADED,
    PROGRESSING,
    READY,
    AscendInferenceServiceStatus,
    Condition,
    ConditionReason,
    RoleStatus,
)
from ascend_operator.autoscale import PoolAsk, PoolCount, resolve
from ascend_operator.clients.resources import SERVICE_CR, Kube
from ascend_operator.controller.operator_metrics import record_scale
from ascend_operator.controller.owned import ensure, hashed_drift
from ascend_operator.controller.service_state import EventSink
from ascend_operator.controller.status import ConditionRecord, Observed, overlay, whole
from ascend_operator.controller.views import stored_status
from ascend_operator.render.desired import Desired
from ascend_operator.render.disaggregation import ROLES, build_role_service, pool_replicas, role_name
from ascend_operator.render.pod import Owner
from ascend_operator.render.router import router_name

Bodies = Mapping[PdRole, Mapping[str, Any] | None]


@dataclass(frozen=True, kw_only=True)
class RoleSeen:
    """One role's service as the pass read it: read once, its stored status through the model (a malformed
    field is left out with one warning per pass, not one per question asked of it)."""

    exists: bool
    replicas: int | None
    """Its spec.replicas (None: not created yet)."""
    status: AscendInferenceServiceStatus

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.status.conditions if c.type == kind), None)


Roles = Mapping[PdRole, RoleSeen]


def read_roles(bodies: Bodies) -> dict[PdRole, RoleSeen]:
    """Each role's service object, typed once for the pass."""
    seen = {}
    for role in ROLES:
        body = bodies.get(role)
        live = ((body or {}).get("spec") or {}).get("replicas")
        seen[role] = RoleSeen(
            exists=body is not None, replicas=None if live is None else int(live), status=stored_status(body)
        )
    return seen


@dataclass(frozen=True, kw_only=True)
class RolesSeen:
    """What the parent's status says about its roles."""

    roles: list[RoleStatus]
    overrides: list[ConditionRecord]
    ready_units: int
    pods: int


def had_roles(previous: AscendInferenceServiceStatus | None) -> bool:
    """Whether the stored status lists roles: a spec that dropped spec.disaggregation still has some to remove
    (an aggregated service never had any, and asks the API server nothing for them)."""
    return previous is not None and bool(previous.roles)


def pool_counts(spec: AscendInferenceServiceSpec, roles: Roles) -> dict[PdRole, PoolCount] | None:
    """With spec.autoscaling, each role's engines: what its own decision asks (its status.autoscaling),
    within the ratio (None without spec.autoscaling: the pools are spec.replicas x pool.replicas)."""
    if spec.autoscaling is None or spec.disaggregation is None:
        return None
    asks: dict[PdRole, PoolAsk] = {}
    for role in ROLES:
        seen = roles[role]
        decision = seen.status.autoscaling
        asks[role] = PoolAsk(
            current=pool_replicas(spec, role) if seen.replicas is None else seen.replicas,
            proposed=None if decision is None else decision.desired_replicas,
        )
    prefill, decode = resolve(asks[PdRole.PREFILL], asks[PdRole.DECODE], spec.autoscaling)
    return {PdRole.PREFILL: prefill, PdRole.DECODE: decode}


def _announce(events: EventSink, desired: Desired, live: Roles, counts: Mapping[PdRole, PoolCount]) -> None:
    """An event on the parent (and its scale counter) for each pool whose engines the autoscaler moves."""
    for role, count in counts.items():
        before = live[role].replicas
        if before is None or before == count.replicas:
            continue
        up = count.replicas > before
        decision = live[role].status.autoscaling
        why = count.held or (decision.message if decision is not None else "")
        reason = ScaleReason.SCALE_UP if up else ScaleReason.SCALE_DOWN
        events("Normal", reason, f"{role.value} {before} -> {count.replicas}: {why}")
        record_scale(desired.owner.namespace, desired.owner.name, up=up)


async def ensure_roles(kube: Kube, events: EventSink, desired: Desired) -> dict[PdRole, dict[str, Any] | None]:
    """Each role's service as the spec renders it (or removed, ours only, when spec.disaggregation is gone);
    returns each role's live object after the pass. With spec.autoscaling, each role's engines are the
    pools' decisions within the ratio (pool_counts)."""
    owner = desired.owner
    wanted = {body["metadata"]["name"]: body for body in desired.roles}
    spec = desired.spec
    if spec.autoscaling is not None and spec.disaggregation is not None:
        before = read_roles(
            {role: await kube.get(SERVICE_CR, owner.namespace, role_name(owner.name, role)) for role in ROLES}
        )
        counts = pool_counts(spec, before)
        assert counts is not None
        _announce(events, desired, before, counts)
        wanted = {
            role_name(owner.name, role): build_role_service(spec, role, owner=owner, replicas=counts[role].replicas)
            for role in ROLES
        }
    seen: dict[PdRole, dict[str, Any] | None] = {}
    for role in ROLES:
        name = role_name(owner.name, role)
        body = wanted.get(name)
        live = await ensure(kube, events, SERVICE_CR, owner, name, body, drift=role_drift,
                            created=EventReason.ROLE_CREATED, removed=EventReason.ROLE_REMOVED)  # fmt: skip
        seen[role] = None if body is None else dict(live or body)  # just created: no status yet
    return seen


def role_drift(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The patch bringing a role back to what the parent renders: when the parent's spec changed (the digest),
    or when someone edited the role (its spec, read as the model, differs: the API server's defaults make the
    raw objects differ even when nothing was edited)."""
    if (patch := hashed_drift(current, desired)) is not None:
        return patch
    try:
        edited = parse_spec(current.get("spec") or {}) != parse_spec(desired["spec"])
    except SpecError:
        edited = True
    return {"spec": desired["spec"]} if edited else None


def _pool_decision(seen: RoleSeen, count: PoolCount | None) -> AutoscalingStatus | None:
    """The role's own decision as the parent acted on it: RatioBound, with why, when the ratio changed it."""
    decision = seen.status.autoscaling
    if decision is None or count is None:
        return decision
    if count.reason is None or count.held is None:
        return decision.model_copy(update={"desired_replicas": count.replicas})
    return decision.model_copy(
        update={
            "desired_replicas": count.replicas,
            "reason": count.reason,
            "message": f"{count.held} (its own decision: {decision.reason.value}, {decision.message})",
        }
    )


def role_status(
    role: PdRole, seen: RoleSeen, *, desired: int, group: str, count: PoolCount | None = None
) -> RoleStatus:
    """One role as its own service's status shows it (`count`: the autoscaler's, for its decision)."""
    ready = seen.condition(READY)
    return RoleStatus(
        role=role.value,
        service=role_name(group, role),
        desired_replicas=desired,
        ready_replicas=seen.status.ready_replicas,
        ready=ready is not None and ready.status == "True",
        reason=ready.reason if ready is not None else ("Pending" if seen.exists else "NotCreated"),
        message=ready.message if ready is not None else "",
        autoscaling=_pool_decision(seen, count),
    )


def _true(kind: str, reason: ConditionReason, message: str) -> ConditionRecord:
    return ConditionRecord(kind, "True", reason, message)


def _false(kind: str, reason: ConditionReason, message: str) -> ConditionRecord:
    return ConditionRecord(kind, "False", reason, message)


def _summary(roles: Sequence[RoleStatus]) -> str:
    return ", ".join(f"{r.role} {r.ready_replicas}/{r.desired_replicas}" for r in roles)


def _states(seen: Roles, kind: str) -> dict[PdRole, Condition | None]:
    """Each role's condition of `kind` (None while the role has none)."""
    return {role: seen[role].condition(kind) for role in ROLES}


def _pair_ready(roles: Sequence[RoleStatus]) -> ConditionRecord:
    counts = _summary(roles)
    late = [r for r in roles if not r.ready]
    if not late:
        return _true(READY, ReadyReason.ALL_ROLES_READY, counts)
    return _false(READY, Relayed(late[0].reason), f"{counts}; {late[0].role}: {late[0].message or late[0].reason}")


def _pair_available(roles: Sequence[RoleStatus], seen: Roles) -> ConditionRecord:
    idle = [role for role, cond in _states(seen, AVAILABLE).items() if cond is None or cond.status != "True"]
    if not idle:
        return _true(AVAILABLE, AvailableReason.ROLES_SERVING, _summary(roles))
    return _false(AVAILABLE, AvailableReason.ROLE_UNAVAILABLE, f"no {idle[0].value} engine serves ({_summary(roles)})")


def _pair_progressing(seen: Roles) -> ConditionRecord:
    states = _states(seen, PROGRESSING)
    moving = [r for r in ROLES if (c := states[r]) is None or c.status != "False"]  # True, or no status yet
    if not moving:
        return _false(PROGRESSING, ProgressingReason.ROLES_UP_TO_DATE, "both roles run the current spec and are ready")
    said = (f"{r.value}: {(c.message if (c := states[r]) else '') or 'starting'}" for r in moving)
    return _true(PROGRESSING, ProgressingReason.ROLES_PROGRESSING, "; ".join(said))


def _pair_degraded(seen: Roles) -> ConditionRecord:
    states = _states(seen, DEGRADED)
    hurt = [r for r in ROLES if (c := states[r]) is not None and c.status == "True"]
    if not hurt:
        return _false(DEGRADED, DegradedReason.AS_EXPECTED, "")
    said = {r: c for r in hurt if (c := states[r]) is not None}
    reason = Relayed(said[hurt[0]].reason or DegradedReason.ROLE_DEGRADED)
    return _true(DEGRADED, reason, "; ".join(f"{r.value}: {c.message}" for r, c in said.items()))


def pair_conditions(roles: Sequence[RoleStatus], seen: Roles) -> list[ConditionRecord]:
    """Ready: both roles Ready. Available: both roles have an engine serving (a request needs a prefill and a
    decode engine). Progressing and Degraded: either role's, named."""
    return [_pair_ready(roles), _pair_available(roles, seen), _pair_progressing(seen), _pair_degraded(seen)]


def observe_roles(parsed: ParsedService, owner: Owner, bodies: Bodies) -> RolesSeen:
    """The parent's view of its roles: their statuses, its four conditions, and the units that serve (a unit
    is the pool's replicas of both roles, so units ready = the fewer of each role's ready / per unit)."""
    spec = parsed.spec
    assert spec.disaggregation is not None
    seen = read_roles(bodies)
    counts = pool_counts(spec, seen)
    roles = [
        role_status(
            role,
            seen[role],
            desired=pool_replicas(spec, role) if counts is None else counts[role].replicas,
            group=owner.name,
            count=None if counts is None else counts[role],
        )
        for role in ROLES
    ]
    pools = spec.disaggregation
    per_unit = {PdRole.PREFILL: pools.prefill.replicas, PdRole.DECODE: pools.decode.replicas}
    units = min(r.ready_replicas // per_unit[PdRole(r.role)] for r in roles)
    pods = sum(seen[role].status.replicas for role in ROLES)
    return RolesSeen(roles=roles, overrides=pair_conditions(roles, seen), ready_units=units, pods=pods)


@dataclass(frozen=True, kw_only=True)
class Pair:
    """A pass's finding on the roles: what replaces the computed status of a disaggregated service, or the
    clearing of `roles` once spec.disaggregation is gone."""

    seen: RolesSeen | None
    selector: str
    endpoint: str | None
    units: int

    def observed(self, obs: Observed) -> Observed:
        if self.seen is None:
            return replace(obs, extra=overlay(obs.extra, AscendInferenceServiceStatus(roles=None)))
        roles = AscendInferenceServiceStatus(
            roles=[whole(r) for r in self.seen.roles],
            replicas=self.seen.pods,
            ready_replicas=self.seen.ready_units,
            desired_replicas=self.units,
        )
        extra = overlay(obs.extra, roles)
        return replace(obs, extra=extra, overrides=self.seen.overrides, selector=self.selector, endpoint=self.endpoint)


def observe_pair(parsed: ParsedService, owner: Owner, bodies: Bodies) -> Pair:
    """The roles as this pass left them, for the status."""
    spec = parsed.spec
    if spec.disaggregation is None:
        return Pair(seen=None, selector="", endpoint=None, units=spec.replicas)
    router = spec.router
    endpoint = None if router is None else f"http://{router_name(owner)}.{owner.namespace}.svc:{router.port}"
    selector = f"{LABEL_SERVICE}={role_name(owner.name, PdRole.DECODE)}"  # one decode pool per unit: HPA counts it
    return Pair(seen=observe_roles(parsed, owner, bodies), selector=selector, endpoint=endpoint, units=spec.replicas)
