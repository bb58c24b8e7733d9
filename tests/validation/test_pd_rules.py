"""The P/D rules vllm-ascend and vllm-router enforce at start or at run time, refused by the operator's
validation naming the field (the TP and kvPort rules' CEL twins are in the CRD: tests/validation/test_crd.py, and
kubectl apply refuses them on the local control plane: tests/e2e/test_disaggregation.py; the recompute rules
read the free-form additionalConfig.extra map, which no CEL rule can), and the typed P/D fields rendered as
the engine and the router read them.

Sources: vllm-ascend v0.25.1rc1 ascend_config.py:187-194 (prefill TP divisible by decode TP), :875-879 and
:892-915 (recompute_scheduler_enable, nested under scheduler_config or not), the Mooncake tutorial
pd_disaggregation_mooncake_multi_node.md:219-230 (kv_port above 20000 + NPUs per node x 1000); vLLM 0.25.1
vllm/config/kv_transfer.py:69-72 (kv_load_failure_policy); vllm-router 0.1.17 router_args.py:176-204
(--prefill-policy, --decode-policy).
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ascend_operator.api.disaggregation import PdRole
from ascend_operator.api.engine import AdditionalConfigSpec
from ascend_operator.api.parse import ParsedService, parse_resource
from ascend_operator.render.desired import router_target
from ascend_operator.render.router import build_router_args
from ascend_operator.validation import Severity, validate_spec
from tests.render.test_pd import OWNER, PARSE, REPO, ROUTER, child, kv_config, parent

RECOMPUTE = {"recompute_scheduler_enable": True}


def _engine(example_body: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The example's engine with `additionalConfig.extra` set (a pool's engine replaces spec.engine whole)."""
    engine: dict[str, Any] = copy.deepcopy(example_body["spec"]["engine"])
    engine.setdefault("additionalConfig", {})["extra"] = extra
    return engine


def _errors(body: dict[str, Any]) -> dict[str, tuple[str, str]]:
    spec = parse_resource(body).spec
    return {f.rule: (f.field, f.message) for f in validate_spec(spec) if f.severity is Severity.ERROR}


def _split(example_body: dict[str, Any], *, npus: int = 8, engine: dict[str, Any] | None = None,
           **pd: Any) -> dict[str, Any]:  # fmt: skip
    body = copy.deepcopy(example_body)
    body["spec"].update(router=ROUTER, npus=npus, disaggregation=pd)
    if engine is not None:
        body["spec"]["engine"] = engine
    return body


@pytest.mark.parametrize(
    ("prefill", "decode", "refused"),
    [
        ({"tensor": 6, "data": 2}, {"tensor": 4, "data": 3}, True),  # 6 >= 4, but 6 % 4: vllm-ascend asserts
        ({"tensor": 12, "data": 1}, {"tensor": 4, "data": 3}, False),
        ({"tensor": 6, "data": 2}, {"tensor": 3, "data": 4}, False),
        ({"tensor": 6, "data": 2}, {"tensor": 6, "data": 2}, False),
    ],
)
def test_prefill_tp_must_be_a_multiple_of_decode_tp(
    example_body: dict[str, Any], prefill: dict[str, int], decode: dict[str, int], refused: bool
) -> None:
    body = _split(example_body, npus=12, prefill={"parallelism": prefill}, decode={"parallelism": decode})
    errors = _errors(body)
    assert ("PrefillTensorMultipleOfDecode" in errors) is refused
    if refused:
        assert errors["PrefillTensorMultipleOfDecode"][0] == "spec.disaggregation.prefill.parallelism.tensor"
        assert "ascend_config.py:192-194" in errors["PrefillTensorMultipleOfDecode"][1]


def test_a_prefill_tp_below_decode_tp_is_said_once(example_body: dict[str, Any]) -> None:
    errors = _errors(_split(example_body, prefill={"parallelism": {"tensor": 4, "data": 2}}))
    assert "PrefillTensorCoversDecode" in errors
    assert "PrefillTensorMultipleOfDecode" not in errors


@pytest.mark.parametrize(
    ("npus", "kv_port", "floor"),
    [(16, 30000, 36000), (16, 35999, 36000), (16, 36000, None), (8, 28000, None), (12, 31000, 32000)],
)
def test_kv_port_is_above_the_transfer_engines_random_ports(
    example_body: dict[str, Any], npus: int, kv_port: int, floor: int | None
) -> None:
    layout = {"parallelism": {"tensor": 8 if npus != 12 else 4, "data": npus // (8 if npus != 12 else 4)}}
    errors = _errors(_split(example_body, npus=npus, kvPort=kv_port, prefill=layout, decode=layout))
    assert ("KvPortAboveTransferPorts" in errors) is (floor is not None)
    if floor is not None:
        field, message = errors["KvPortAboveTransferPorts"]
        assert field == "spec.disaggregation.kvPort"
        assert f"at least {floor} for spec.npus {npus}" in message


@pytest.mark.parametrize(
    ("where", "extra", "field"),
    [
        ("decode", RECOMPUTE, "spec.disaggregation.decode.engine.additionalConfig.extra"),
        ("decode", {"scheduler_config": RECOMPUTE}, "spec.disaggregation.decode.engine.additionalConfig.extra"),
        # the nested key wins over the deprecated top-level one (ascend_config.py:899-907)
        ("decode", {"scheduler_config": {"recompute_scheduler_enable": False}, **RECOMPUTE}, None),
        ("decode", {"recompute_scheduler_enable": False}, None),
        ("prefill", RECOMPUTE, None),  # a prefill engine never recomputes for the router
        ("spec", RECOMPUTE, "spec.engine.additionalConfig.extra"),  # the decode pool takes spec.engine
    ],
)
def test_recompute_scheduler_is_refused_on_decode_engines_behind_vllm_router(
    example_body: dict[str, Any], where: str, extra: dict[str, Any], field: str | None
) -> None:
    engine = _engine(example_body, **extra)
    if where == "spec":
        body = _split(example_body, engine=engine)
    else:
        body = _split(example_body, **{where: {"engine": engine}})  # type: ignore[arg-type]
    errors = _errors(body)
    assert ("NoRecomputeSchedulerOnDecodePool" in errors) is (field is not None)
    assert "NoRecomputeSchedulerOnDecodeRole" not in errors  # the parent's finding says it, once
    if field is not None:
        assert f"set at {field}" in errors["NoRecomputeSchedulerOnDecodePool"][1]
        assert "recomputed" in errors["NoRecomputeSchedulerOnDecodePool"][1]


def test_a_decode_role_edited_to_recompute_is_refused_naming_its_engine(example_body: dict[str, Any]) -> None:
    role = child(parent(example_body), PdRole.DECODE)
    edited = role.model_copy(
        update={"engine": role.engine.model_copy(update={"additional_config": parse_extra(RECOMPUTE)})}
    )
    findings = {f.rule: f.field for f in validate_spec(edited) if f.severity is Severity.ERROR}
    assert findings["NoRecomputeSchedulerOnDecodeRole"] == "spec.engine.additionalConfig.extra"
    prefill = child(parent(example_body), PdRole.PREFILL)
    prefill = prefill.model_copy(
        update={"engine": prefill.engine.model_copy(update={"additional_config": parse_extra(RECOMPUTE)})}
    )
    assert "NoRecomputeSchedulerOnDecodeRole" not in {f.rule for f in validate_spec(prefill)}


def parse_extra(extra: dict[str, Any]) -> AdditionalConfigSpec:
    return AdditionalConfigSpec(extra=extra)


@pytest.mark.parametrize("policy", [None, "recompute", "fail"])
def test_kv_load_failure_policy_reaches_both_roles_kv_transfer_config(
    example_body: dict[str, Any], policy: str | None
) -> None:
    pd: dict[str, Any] = {} if policy is None else {"kvLoadFailurePolicy": policy}
    spec = parent(example_body, **pd)
    for role in PdRole:
        config = kv_config(child(spec, role))
        assert config.get("kv_load_failure_policy") == policy  # unset: left out, vLLM's "fail"


def test_each_pools_router_policy_is_what_vllm_router_reads_for_that_role(example_body: dict[str, Any]) -> None:
    spec = parent(example_body, prefill={"routerPolicy": "round_robin"}, decode={"routerPolicy": "power_of_two"})
    assert spec.router is not None
    parsed = ParsedService(name="dsv4", namespace="llm", uid="u", generation=1, spec=spec)
    args = build_router_args(spec.router, router_target(parsed.spec, OWNER))
    out = subprocess.run(["bash", str(REPO / "hack" / "vllm-router.sh")], capture_output=True, text=True, timeout=900)
    python = Path(out.stdout.strip().splitlines()[-1]).parent / "python"
    got = json.loads(
        subprocess.run([str(python), "-c", PARSE, json.dumps(args)], capture_output=True, text=True, check=True).stdout
    )
    assert (got["prefill_policy"], got["decode_policy"], got["policy"]) == (
        "round_robin",
        "power_of_two",
        "cache_aware",
    )
    unset = parent(example_body)
    assert unset.router is not None
    plain = build_router_args(unset.router, router_target(unset, OWNER))
    assert "--prefill-policy" not in plain
    assert "--decode-policy" not in plain
