"""The rules of a disaggregated service (spec.disaggregation) and of its roles (spec.pdRole), with their CEL
twins, so `kubectl apply` refuses a P/D spec vllm-ascend or vllm-router would refuse minutes later.

Sources (docs/router.md "P/D contract" and docs/disaggregation.md): prefill TP must be at least decode TP
(vllm-ascend v0.25.1rc1 kv_p2p/mooncake_connector.py:1926-1930, a ValueError at engine start); the router's
P/D path needs the router (`--vllm-pd-disaggregation`), discovers both roles on one
`--service-discovery-port`, and reads only the prefill and decode selectors; a pool is one node (the roles'
pods are selected by their service label alone, and the connector's multi-node metadata is not rendered).
A pool's own engine rules (batched tokens, block size, the HBM budget) are checked on the role's spec by
validate.py, which names the pool's field.
"""

from ascend_operator.api.disaggregation import DisaggregationSpec, PdRole
from ascend_operator.api.layout import Parallelism
from ascend_operator.validation.rule import Rule, Spec

#: Parallelism.tensor's default, for CEL (which sees no defaults of absent objects).
_TP = 8
_PORT = 8000


def _pool(pd: DisaggregationSpec, role: PdRole) -> Parallelism | None:
    return (pd.prefill if role is PdRole.PREFILL else pd.decode).parallelism


def _layout(spec: Spec, role: PdRole) -> Parallelism:
    assert spec.disaggregation is not None
    return _pool(spec.disaggregation, role) or spec.parallelism


def _cel_or(path: str, default: str) -> str:
    """`self.a.b.c` when every step is present, else `default` (CEL has no optional chaining here)."""
    steps = path.split(".")
    guards = " && ".join(f"has(self.{'.'.join(steps[: i + 1])})" for i in range(len(steps)))
    return f"(({guards}) ? self.{path} : {default})"


def _cel_pool_tensor(role: str) -> str:
    return _cel_or(f"disaggregation.{role}.parallelism.tensor", _cel_or("parallelism.tensor", str(_TP)))


def _cel_pool_port(role: str) -> str:
    return _cel_or(f"disaggregation.{role}.engine.port", _cel_or("engine.port", str(_PORT)))


def _tensor_ok(spec: Spec) -> bool:
    return spec.disaggregation is None or (_layout(spec, PdRole.PREFILL).tensor >= _layout(spec, PdRole.DECODE).tensor)


def _single_node(spec: Spec) -> bool:
    return spec.disaggregation is None or all(_layout(spec, r).nodes == 1 for r in PdRole)


def _fits_npus(spec: Spec) -> bool:
    return spec.disaggregation is None or all(
        (layout := _layout(spec, r)).tensor * layout.data == spec.npus for r in PdRole
    )


def _one_port(spec: Spec) -> bool:
    pd = spec.disaggregation
    return pd is None or all(p.engine is None or p.engine.port == spec.engine.port for p in (pd.prefill, pd.decode))


def _pool_nodes_cel(role: str) -> str:
    return _cel_or(f"disaggregation.{role}.parallelism.nodes", _cel_or("parallelism.nodes", "1")) + " == 1"


def _pool_npus_cel(role: str) -> str:
    tensor = _cel_pool_tensor(role)
    data = _cel_or(f"disaggregation.{role}.parallelism.data", _cel_or("parallelism.data", "1"))
    return f"{tensor} * {data} == (has(self.npus) ? self.npus : 8)"


PD_RULES: tuple[Rule, ...] = (
    Rule(
        name="DisaggregationNeedsRouter",
        field="spec.router",
        message="spec.disaggregation needs spec.router: vllm-router's P/D path (--vllm-pd-disaggregation) is what "
        "sends a request to a prefill engine and then, with its KV transfer parameters, to a decode engine",
        check=lambda s: s.disaggregation is None or s.router is not None,
        cel="!has(self.disaggregation) || has(self.router)",
        cel_field_path=".router",
    ),
    Rule(
        name="PrefillTensorCoversDecode",
        field="spec.disaggregation.prefill.parallelism.tensor",
        message="the prefill pool's tensor parallelism must be at least the decode pool's: vllm-ascend's Mooncake "
        "connector refuses to start otherwise (mooncake_connector.py:1926-1930); unset pools take "
        "spec.parallelism",
        check=_tensor_ok,
        cel=f"!has(self.disaggregation) || {_cel_pool_tensor('prefill')} >= {_cel_pool_tensor('decode')}",
        cel_field_path=".disaggregation",
    ),
    Rule(
        name="DisaggregatedPoolsSingleNode",
        field="spec.disaggregation",
        message="each pool of spec.disaggregation is one node per replica (parallelism.nodes 1, also when the pool "
        "takes spec.parallelism): the router selects each role's pods by its service label, which a multi-node "
        "group's workers also carry",
        check=_single_node,
        cel=f"!has(self.disaggregation) || ({_pool_nodes_cel('prefill')} && {_pool_nodes_cel('decode')})",
        cel_field_path=".disaggregation",
    ),
    Rule(
        name="PoolParallelismMatchesNPUs",
        field="spec.disaggregation",
        message="each pool's parallelism.tensor x parallelism.data must equal spec.npus: a pool's replica is one "
        "pod of spec.npus NPUs split into data engines of tensor NPUs",
        check=_fits_npus,
        cel=f"!has(self.disaggregation) || ({_pool_npus_cel('prefill')} && {_pool_npus_cel('decode')})",
        cel_field_path=".disaggregation",
    ),
    Rule(
        name="PoolsShareEnginePort",
        field="spec.disaggregation",
        message="a pool's engine.port must be spec.engine.port: the router discovers both roles on one "
        "--service-discovery-port",
        check=_one_port,
        cel="!has(self.disaggregation) || "
        f"({_cel_pool_port('prefill')} == {_cel_or('engine.port', str(_PORT))} && "
        f"{_cel_pool_port('decode')} == {_cel_or('engine.port', str(_PORT))})",
        cel_field_path=".disaggregation",
    ),
    Rule(
        name="DisaggregationNotInARole",
        field="spec.disaggregation",
        message="spec.disaggregation and spec.pdRole exclude each other: a role of a disaggregated service is not "
        "split again",
        check=lambda s: s.disaggregation is None or s.pd_role is None,
        cel="!has(self.disaggregation) || !has(self.pdRole)",
        cel_field_path=".disaggregation",
    ),
    Rule(
        name="RoleHasNoRouter",
        field="spec.router",
        message="a service with spec.pdRole has no router of its own: the disaggregated service's router routes to it",
        check=lambda s: s.pd_role is None or s.router is None,
        cel="!has(self.pdRole) || !has(self.router)",
        cel_field_path=".router",
    ),
    Rule(
        name="DisaggregationWithoutInferencePool",
        field="spec.routing.inferencePool.enabled",
        message="spec.routing.inferencePool cannot be enabled with spec.disaggregation: a pool's endpoint picker "
        "would send whole requests to one engine, bypassing the prefill/decode split; clients use the router",
        check=lambda s: s.disaggregation is None or not s.routing.inference_pool.enabled,
        cel="!has(self.disaggregation) || !has(self.routing) || !has(self.routing.inferencePool) || "
        "!has(self.routing.inferencePool.enabled) || !self.routing.inferencePool.enabled",
        cel_field_path=".routing",
    ),
)
