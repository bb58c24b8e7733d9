"""The rules of a disaggregated service (spec.disaggregation) and of its roles (spec.pdRole), with their CEL
twins, so `kubectl apply` refuses a P/D spec vllm-ascend or vllm-router would refuse minutes later.

Sources (docs/router.md "P/D contract" and docs/disaggregation.md): prefill TP must be at least decode TP
(vllm-ascend v0.25.1rc1 kv_p2p/mooncake_connector.py:1926-1930, a ValueError at engine start) and a multiple
of it (ascend_config.py:187-194, an assert for non-MLA models; the operator reads no config.json, so it asks
it of every model: an MLA model's TPs divide its attention heads, vllm/config/model.py:1212, and on the
power-of-two head counts of DeepSeek V2/V3 and Kimi K2 "at least" already means "a multiple"); the kv_port
above AscendDirectTransport's random ports, [20000, 20000 + NPUs per node x 1000) (tutorial
pd_disaggregation_mooncake_multi_node.md:219-230); no `recompute_scheduler_enable` on decode engines, whose
`stop_reason: "recomputed"` vllm-router does not retry (DeepSeek-V4-Flash.md:831 wants a proxy that does); the router's
P/D path needs the router (`--vllm-pd-disaggregation`), discovers both roles on one
`--service-discovery-port`, and reads only the prefill and decode selectors; a pool is one node (the roles'
pods are selected by their service label alone, and the connector's multi-node metadata is not rendered).
A pool's own engine rules (batched tokens, block size, the HBM budget) are checked on the role's spec by
validate.py, which names the pool's field.
"""

from typing import Any

from ascend_operator.api.disaggregation import (
    DEFAULT_KV_PORT,
    TRANSPORT_PORT_BASE,
    TRANSPORT_PORTS_PER_NPU,
    DisaggregationSpec,
    PdRole,
)
from ascend_operator.api.engine import EngineSpec
from ascend_operator.api.layout import Parallelism
from ascend_operator.validation.rule import Spec, SpecRule

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


def _tensor_multiple(spec: Spec) -> bool:
    if spec.disaggregation is None:
        return True
    prefill, decode = _layout(spec, PdRole.PREFILL).tensor, _layout(spec, PdRole.DECODE).tensor
    return prefill < decode or prefill % decode == 0  # below: PrefillTensorCoversDecode says so


def _kv_port_floor(spec: Spec) -> int:
    return TRANSPORT_PORT_BASE + TRANSPORT_PORTS_PER_NPU * spec.npus


def _kv_port_ok(spec: Spec) -> bool:
    return spec.disaggregation is None or spec.disaggregation.kv_port >= _kv_port_floor(spec)


RECOMPUTE_KEY = "recompute_scheduler_enable"


def recompute_scheduler(engine: EngineSpec) -> bool:
    """vllm-ascend's effective `recompute_scheduler_enable` from `--additional-config` (ascend_config.py:875-879,
    892-915): `scheduler_config.recompute_scheduler_enable` when present, else the deprecated top-level key;
    truthy as Python reads it."""
    extra = engine.additional_config.extra
    nested: Any = extra.get("scheduler_config")
    if isinstance(nested, dict) and RECOMPUTE_KEY in nested:
        return bool(nested[RECOMPUTE_KEY])
    return bool(extra.get(RECOMPUTE_KEY))


def _decode_engine(spec: Spec) -> EngineSpec:
    assert spec.disaggregation is not None
    return spec.disaggregation.decode.engine or spec.engine


def _no_recompute_on_decode_pool(spec: Spec) -> bool:
    return spec.disaggregation is None or not recompute_scheduler(_decode_engine(spec))


def _no_recompute_on_decode_role(spec: Spec) -> bool:
    return spec.pd_role is None or spec.pd_role.role is not PdRole.DECODE or not recompute_scheduler(spec.engine)


def _recompute_at(spec: Spec) -> str:
    assert spec.disaggregation is not None
    where = "spec.disaggregation.decode.engine" if spec.disaggregation.decode.engine else "spec.engine"
    return f"set at {where}.additionalConfig.extra"


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


PD_RULES: tuple[SpecRule, ...] = (
    SpecRule(
        name="DisaggregationNeedsRouter",
        field="spec.router",
        message="spec.disaggregation needs spec.router: vllm-router's P/D path (--vllm-pd-disaggregation) is what "
        "sends a request to a prefill engine and then, with its KV transfer parameters, to a decode engine",
        check=lambda s: s.disaggregation is None or s.router is not None,
        cel="!has(self.disaggregation) || has(self.router)",
        cel_field_path=".router",
    ),
    SpecRule(
        name="PrefillTensorCoversDecode",
        field="spec.disaggregation.prefill.parallelism.tensor",
        message="the prefill pool's tensor parallelism must be at least the decode pool's: vllm-ascend's Mooncake "
        "connector refuses to start otherwise (mooncake_connector.py:1926-1930); unset pools take "
        "spec.parallelism",
        check=_tensor_ok,
        cel=f"!has(self.disaggregation) || {_cel_pool_tensor('prefill')} >= {_cel_pool_tensor('decode')}",
        cel_field_path=".disaggregation",
    ),
    SpecRule(
        name="PrefillTensorMultipleOfDecode",
        field="spec.disaggregation.prefill.parallelism.tensor",
        message="the prefill pool's tensor parallelism must be a multiple of the decode pool's: vllm-ascend "
        "splits each prefill rank's KV heads over prefill TP / decode TP decode ranks and asserts it divides "
        "(ascend_config.py:192-194); unset pools take spec.parallelism",
        check=_tensor_multiple,
        cel=f"!has(self.disaggregation) || {_cel_pool_tensor('prefill')} < {_cel_pool_tensor('decode')} || "
        f"{_cel_pool_tensor('prefill')} % {_cel_pool_tensor('decode')} == 0",
        cel_field_path=".disaggregation",
    ),
    SpecRule(
        name="KvPortAboveTransferPorts",
        field="spec.disaggregation.kvPort",
        message="spec.disaggregation.kvPort must be at least 20000 + 1000 x spec.npus: Mooncake's "
        "AscendDirectTransport takes random ports in [20000, 20000 + NPUs per node x 1000), and a kv_port in "
        "that range fails intermittently with 'Address already in use' (tutorial :219-230: 36000 on 16 NPUs)",
        check=_kv_port_ok,
        cel="!has(self.disaggregation) || (has(self.disaggregation.kvPort) ? self.disaggregation.kvPort : "
        f"{DEFAULT_KV_PORT}) >= {TRANSPORT_PORT_BASE} + {TRANSPORT_PORTS_PER_NPU} * "
        "(has(self.npus) ? self.npus : 8)",
        cel_field_path=".disaggregation.kvPort",
        detail=lambda s: f"at least {_kv_port_floor(s)} for spec.npus {s.npus}",
    ),
    SpecRule(
        name="NoRecomputeSchedulerOnDecodePool",
        field="spec.disaggregation.decode.engine.additionalConfig.extra",
        message="the decode engines may not turn on vllm-ascend's recompute_scheduler_enable (additionalConfig."
        "extra, top level or under scheduler_config): a decode engine short of KV then ends requests with "
        "stop_reason 'recomputed' for a proxy to send back to prefill, and vllm-router 0.1.17 returns them to "
        "the client as they are (the decode pool takes spec.engine when it sets no engine)",
        check=_no_recompute_on_decode_pool,
        # no CEL twin: the API server types no field of the free-form additionalConfig.extra map (compiling one
        # fails with "undefined field 'extra'", seen on kube-apiserver v1.37.2), so only the operator refuses it
        detail=_recompute_at,
    ),
    SpecRule(
        name="NoRecomputeSchedulerOnDecodeRole",
        field="spec.engine.additionalConfig.extra",
        message="a decode role's engine may not turn on vllm-ascend's recompute_scheduler_enable: vllm-router "
        "0.1.17 does not send its 'recomputed' requests back to prefill",
        check=_no_recompute_on_decode_role,  # no CEL twin either (see above)
    ),
    SpecRule(
        name="DisaggregatedPoolsSingleNode",
        field="spec.disaggregation",
        message="each pool of spec.disaggregation is one node per replica (parallelism.nodes 1, also when the pool "
        "takes spec.parallelism): the router selects each role's pods by its service label, which a multi-node "
        "group's workers also carry",
        check=_single_node,
        cel=f"!has(self.disaggregation) || ({_pool_nodes_cel('prefill')} && {_pool_nodes_cel('decode')})",
        cel_field_path=".disaggregation",
    ),
    SpecRule(
        name="PoolParallelismMatchesNPUs",
        field="spec.disaggregation",
        message="each pool's parallelism.tensor x parallelism.data must equal spec.npus: a pool's replica is one "
        "pod of spec.npus NPUs split into data engines of tensor NPUs",
        check=_fits_npus,
        cel=f"!has(self.disaggregation) || ({_pool_npus_cel('prefill')} && {_pool_npus_cel('decode')})",
        cel_field_path=".disaggregation",
    ),
    SpecRule(
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
    SpecRule(
        name="DisaggregationNotInARole",
        field="spec.disaggregation",
        message="spec.disaggregation and spec.pdRole exclude each other: a role of a disaggregated service is not "
        "split again",
        check=lambda s: s.disaggregation is None or s.pd_role is None,
        cel="!has(self.disaggregation) || !has(self.pdRole)",
        cel_field_path=".disaggregation",
    ),
    SpecRule(
        name="RoleHasNoRouter",
        field="spec.router",
        message="a service with spec.pdRole has no router of its own: the disaggregated service's router routes to it",
        check=lambda s: s.pd_role is None or s.router is None,
        cel="!has(self.pdRole) || !has(self.router)",
        cel_field_path=".router",
    ),
    SpecRule(
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
