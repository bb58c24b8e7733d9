"""A disaggregated service's two roles, rendered as the AscendInferenceServices the parent owns.

Why whole services (api/disaggregation.py says more): each role then has everything an aggregated service
has, from the same code. This module turns the parent's spec into each role's spec: the parent's settings,
the pool's layout and engine settings in place of the parent's, `spec.replicas x pool.replicas` engines,
and `spec.pdRole` naming the group, the role and the Mooncake `--kv-transfer-config` (both sides' TP and
DP, which the connector asserts on: mooncake_connector.py:2012-2026). A prefill role's canary asks for one
token, as the router's prefill leg does. The router is the parent's; a role
has none of its own, no InferencePool and no nested disaggregation.

With spec.autoscaling, a role carries its pool's autoscaling (its own bounds and targets): the role decides
on its own side's signals and the parent writes each role's engines (controller/disaggregation.py,
autoscale/disaggregation.py), so the count is an argument here; the parent's spec.replicas x
pool.replicas, within the pool's bounds, is only where a new role starts.

The role's spec is written whole, every field present (null for an unset optional one), so a JSON merge
patch of it removes what the parent no longer sets; the digest annotation tells a pass whether it changed,
because the API server's defaulting makes the live spec differ from the rendered one.
"""

from typing import Any

from ascend_operator.api.constants import (
    ANNOTATION_SPEC_HASH,
    API_VERSION,
    GROUP,
    KIND,
    LABEL_SERVICE,
    MANAGED_BY,
)
from ascend_operator.api.disaggregation import (
    ConnectorExtra,
    DisaggregationSpec,
    KvRole,
    KvTransferConfig,
    PdRole,
    PdRoleSpec,
    PoolSpec,
    SideParallelism,
)
from ascend_operator.api.layout import Parallelism
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.render.pod import Owner, engine_digest, owner_metadata

#: On a role's AscendInferenceService: the disaggregated service it belongs to, and which role it is.
LABEL_PD_GROUP = f"{GROUP}/pd-group"
LABEL_PD_ROLE = f"{GROUP}/pd-role"
ROLES = (PdRole.PREFILL, PdRole.DECODE)
_KV_ROLE = {PdRole.PREFILL: KvRole.PRODUCER, PdRole.DECODE: KvRole.CONSUMER}


def role_name(group: str, role: PdRole) -> str:
    """`<group>-prefill` / `<group>-decode`."""
    return f"{group}-{role.value}"


def pool(pd: DisaggregationSpec, role: PdRole) -> PoolSpec:
    return pd.prefill if role is PdRole.PREFILL else pd.decode


def pool_parallelism(spec: AscendInferenceServiceSpec, role: PdRole) -> Parallelism:
    """The role's layout: its pool's, else the parent's."""
    assert spec.disaggregation is not None
    return pool(spec.disaggregation, role).parallelism or spec.parallelism


def pool_replicas(spec: AscendInferenceServiceSpec, role: PdRole) -> int:
    """Engines of this role: units x the pool's replicas per unit (within the pool's autoscaling bounds)."""
    assert spec.disaggregation is not None
    engines = spec.replicas * pool(spec.disaggregation, role).replicas
    if spec.autoscaling is None:
        return engines
    bounds = spec.autoscaling.pool(role.value)
    return max(bounds.min_replicas, min(bounds.max_replicas, engines))


def _side(layout: Parallelism) -> SideParallelism:
    return SideParallelism(tp_size=layout.tensor, dp_size=layout.data)


def role_spec(
    spec: AscendInferenceServiceSpec, role: PdRole, *, group: str, replicas: int | None = None
) -> AscendInferenceServiceSpec:
    """The spec of one role's service (`replicas`: the autoscaler's count for the pool, else pool_replicas)."""
    pd = spec.disaggregation
    assert pd is not None
    mine = pool(pd, role)
    pool_env = {var.name for var in mine.env}
    kv = KvTransferConfig(
        kv_role=_KV_ROLE[role],
        kv_port=pd.kv_port,
        kv_connector_extra_config=ConnectorExtra(
            prefill=_side(pool_parallelism(spec, PdRole.PREFILL)), decode=_side(pool_parallelism(spec, PdRole.DECODE))
        ),
        kv_load_failure_policy=pd.kv_load_failure_policy,
    )
    health = spec.health
    if role is PdRole.PREFILL:  # a prefill engine's requests are one token long: so is its canary
        health = health.model_copy(update={"canary": health.canary.model_copy(update={"max_tokens": 1})})
    return spec.model_copy(
        update={
            "replicas": pool_replicas(spec, role) if replicas is None else replicas,
            "autoscaling": None if spec.autoscaling is None else spec.autoscaling.pool(role.value),
            "health": health,
            "parallelism": pool_parallelism(spec, role),
            "engine": mine.engine or spec.engine,
            "env": [*(var for var in spec.env if var.name not in pool_env), *mine.env],
            "disaggregation": None,
            "router": None,
            "routing": type(spec.routing)(),
            "pd_role": PdRoleSpec(group=group, role=role, kv_transfer=kv, abort_seconds=pd.abort_seconds),
        }
    )


def build_role_service(
    spec: AscendInferenceServiceSpec, role: PdRole, *, owner: Owner, replicas: int | None = None
) -> dict[str, Any]:
    """The role's AscendInferenceService, owned by the parent (garbage collection removes it with it)."""
    body = role_spec(spec, role, group=owner.name, replicas=replicas).model_dump(mode="json", by_alias=True)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": role_name(owner.name, role),
            "namespace": owner.namespace,
            "labels": {
                LABEL_PD_GROUP: owner.name,
                LABEL_PD_ROLE: role.value,
                "app.kubernetes.io/managed-by": MANAGED_BY,
            },
            "annotations": {ANNOTATION_SPEC_HASH: engine_digest(body)},
            **owner_metadata(owner),
        },
        "spec": body,
    }


def role_selector(group: str, role: PdRole) -> dict[str, str]:
    """The labels of one role's serving pods (its service's selector label; pools are single-node)."""
    return {LABEL_SERVICE: role_name(group, role)}
