"""spec.disaggregation, from the spec to what runs: the two role services, their engines' Mooncake settings,
the router's P/D arguments (read back by vllm-router 0.1.17's own parser), the refusals, and the parent's
status computed from its roles.

Why it exists: a P/D pair works only if both sides agree on everything vllm-ascend's connector asserts
(both sides' TP and DP, kv_role, the port base), the router is in P/D mode with one selector per role, and a
user sees in the parent whether the pair serves. A wrong key is a pod that crash-loops minutes after apply.
"""

from __future__ import annotations

import copy
import json
import logging
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ascend_operator.api.disaggregation import PdRole
from ascend_operator.api.parse import parse_resource
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.controller.disaggregation import pair_conditions, read_roles, role_status
from ascend_operator.health.stall import decode_slots
from ascend_operator.render.args import build_engine_args
from ascend_operator.render.disaggregation import build_role_service, role_spec
from ascend_operator.render.env import build_env
from ascend_operator.render.netpol import OperatorPeer, build_network_policy
from ascend_operator.render.pod import Owner
from ascend_operator.validation.validate import validate_spec

OWNER = Owner(name="dsv4", namespace="llm", uid="parent-uid")
ROUTER = {"image": "registry.example/vllm-router:0.1.17"}
REPO = Path(__file__).resolve().parents[2]
EPP = {"name": "epp", "port": {"number": 9002}}


def parent(example_body: dict[str, Any], **pd: Any) -> AscendInferenceServiceSpec:
    body = copy.deepcopy(example_body)
    body["spec"].update(router=ROUTER, replicas=2, disaggregation=pd)
    return parse_resource(body).spec


def child(spec: AscendInferenceServiceSpec, role: PdRole) -> AscendInferenceServiceSpec:
    """The role's service as the API server would store it, parsed back."""
    return parse_resource(build_role_service(spec, role, owner=OWNER)).spec


def kv_config(spec: AscendInferenceServiceSpec) -> dict[str, Any]:
    args = build_engine_args(spec)
    parsed: dict[str, Any] = json.loads(args[args.index("--kv-transfer-config") + 1])
    return parsed


def test_each_role_is_a_service_with_the_connector_settings_vllm_ascend_asserts_on(
    example_body: dict[str, Any],
) -> None:
    spec = parent(
        example_body,
        prefill={"replicas": 1, "engine": {"maxNumBatchedTokens": 16384, "maxNumSeqs": 4}},
        decode={"replicas": 3, "parallelism": {"tensor": 4, "data": 2}},
    )
    prefill, decode = child(spec, PdRole.PREFILL), child(spec, PdRole.DECODE)
    assert (prefill.replicas, decode.replicas) == (2, 6)  # 2 units of 1P + 3D
    assert prefill.engine.max_num_batched_tokens == 16384
    assert decode.engine == spec.engine  # the decode pool keeps the parent's engine settings
    sides = {"prefill": {"tp_size": 8, "dp_size": 1}, "decode": {"tp_size": 4, "dp_size": 2}}
    assert kv_config(prefill) == {
        "kv_connector": "MooncakeConnectorV1",
        "kv_role": "kv_producer",
        "kv_port": 36000,
        "kv_connector_extra_config": sides,
    }
    assert kv_config(decode)["kv_role"] == "kv_consumer"
    assert kv_config(decode)["kv_connector_extra_config"] == sides
    args = build_engine_args(decode)
    assert args[args.index("--tensor-parallel-size") + 1] == "4"
    assert args[args.index("--data-parallel-size") + 1] == "2"
    assert prefill.router is None
    assert prefill.disaggregation is None
    assert prefill.health.canary.max_tokens == 1  # as the router's prefill leg
    assert decode.health.canary.max_tokens == spec.health.canary.max_tokens
    assert validate_spec(prefill) == validate_spec(role_spec(spec, PdRole.PREFILL, group="dsv4"))
    assert not [f for f in validate_spec(decode) if f.severity == "error"]


def test_the_role_services_are_owned_labelled_and_named_after_the_parent(example_body: dict[str, Any]) -> None:
    body = build_role_service(parent(example_body), PdRole.DECODE, owner=OWNER)
    meta = body["metadata"]
    assert meta["name"] == "dsv4-decode"
    assert meta["labels"]["inference.ascend.dev/pd-group"] == "dsv4"
    assert meta["ownerReferences"][0]["uid"] == "parent-uid"
    assert meta["ownerReferences"][0]["controller"]
    assert body["spec"]["pdRole"]["group"] == "dsv4"
    assert "router" in body["spec"]
    assert body["spec"]["router"] is None


def test_a_prefill_engine_publishes_its_pod_ip_and_frees_unpulled_kv(example_body: dict[str, Any]) -> None:
    spec = parent(example_body, kvPort=40000, abortSeconds=120)
    env = {e["name"]: e for e in build_env(child(spec, PdRole.PREFILL))}
    assert env["VLLM_HOST_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT"]["value"] == "120"
    decode_env = {e["name"] for e in build_env(child(spec, PdRole.DECODE))}
    assert "VLLM_HOST_IP" in decode_env
    assert "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT" not in decode_env
    assert kv_config(child(spec, PdRole.DECODE))["kv_port"] == 40000


def test_a_role_admits_the_group_s_router_and_the_other_role_on_every_port(example_body: dict[str, Any]) -> None:
    spec = child(parent(example_body), PdRole.DECODE)
    policy = build_network_policy(spec, owner=Owner(name="dsv4-decode", namespace="llm"), operator=OperatorPeer())
    assert policy is not None
    rules = policy["spec"]["ingress"]
    router = [
        r for r in rules if r["from"] == [{"podSelector": {"matchLabels": {"inference.ascend.dev/router": "dsv4"}}}]
    ]
    assert router
    assert router[0]["ports"] == [{"protocol": "TCP", "port": 8000}]
    roles = {"key": "inference.ascend.dev/service", "operator": "In", "values": ["dsv4-prefill", "dsv4-decode"]}
    pair = [r for r in rules if r["from"] == [{"podSelector": {"matchExpressions": [roles]}}]]
    assert pair
    assert "ports" not in pair[0]


@pytest.mark.parametrize(
    ("change", "rule", "field"),
    [
        ({"router": None}, "DisaggregationNeedsRouter", "spec.router"),
        (
            {"disaggregation": {"prefill": {"parallelism": {"tensor": 4, "data": 2}}}},
            "PrefillTensorCoversDecode",
            "spec.disaggregation.prefill.parallelism.tensor",
        ),
        ({"disaggregation": {"decode": {"parallelism": {"tensor": 4, "data": 1}}}}, "PoolParallelismMatchesNPUs", None),
        ({"disaggregation": {"decode": {"engine": {"port": 9000}}}}, "PoolsShareEnginePort", None),
        (
            {
                "routing": {
                    "inferencePool": {"enabled": True, "endpointPickerRef": {"name": "epp", "port": {"number": 9002}}}
                }
            },
            "DisaggregationWithoutInferencePool",
            None,
        ),
        (
            {"disaggregation": {"decode": {"engine": {"maxNumSeqs": 64, "maxNumBatchedTokens": 32}}}},
            "BatchedTokensCoverSeqs",
            "spec.disaggregation.decode.engine.maxNumBatchedTokens",
        ),
    ],
)
def test_a_pair_vllm_ascend_or_the_router_would_refuse_is_refused_naming_the_field(
    example_body: dict[str, Any], change: dict[str, Any], rule: str, field: str | None
) -> None:
    body = copy.deepcopy(example_body)
    body["spec"].update({"router": ROUTER, "disaggregation": {}, **change})
    if body["spec"]["router"] is None:
        del body["spec"]["router"]
    errors = [f for f in validate_spec(parse_resource(body).spec) if f.severity == "error"]
    assert [f.rule for f in errors] == [rule]
    if field is not None:
        assert errors[0].field == field


def role_body(ready: bool, *, ready_replicas: int, available: bool = True, reason: str = "") -> dict[str, Any]:
    status = "True" if ready else "False"
    return {
        "status": {
            "readyReplicas": ready_replicas,
            "replicas": ready_replicas,
            "conditions": [
                {"type": "Ready", "status": status, "reason": reason or "AllReplicasReady", "message": "m"},
                {"type": "Available", "status": "True" if available else "False", "reason": "ReplicasServing"},
                {
                    "type": "Progressing",
                    "status": "False" if ready else "True",
                    "reason": "Rolling",
                    "message": "rolling",
                },
                {"type": "Degraded", "status": "False", "reason": "AsExpected"},
            ],
        }
    }


def test_the_parent_serves_only_while_both_roles_do() -> None:
    bodies: dict[PdRole, dict[str, Any] | None] = {
        PdRole.PREFILL: role_body(True, ready_replicas=1),
        PdRole.DECODE: role_body(False, ready_replicas=0, available=False, reason="Stalled"),
    }
    seen = read_roles(bodies)
    roles = [role_status(r, seen[r], desired=1, group="dsv4") for r in PdRole]
    ready, available, progressing, degraded = pair_conditions(roles, seen)
    assert (ready.status, ready.reason) == ("False", "Stalled")
    assert "decode" in ready.message
    assert "prefill 1/1" in ready.message
    assert (available.status, available.reason) == ("False", "RoleUnavailable")
    assert "no decode engine serves" in available.message
    assert progressing.status == "True"
    assert "decode: rolling" in progressing.message
    assert degraded.status == "False"

    bodies[PdRole.DECODE] = role_body(True, ready_replicas=1)
    seen = read_roles(bodies)
    roles = [role_status(r, seen[r], desired=1, group="dsv4") for r in PdRole]
    ready, available, progressing, _ = pair_conditions(roles, seen)
    assert (ready.status, available.status, progressing.status) == ("True", "True", "False")

    bodies[PdRole.PREFILL] = None  # not created yet
    seen = read_roles(bodies)
    roles = [role_status(r, seen[r], desired=1, group="dsv4") for r in PdRole]
    ready, _, progressing, _ = pair_conditions(roles, seen)
    assert (ready.status, ready.reason) == ("False", "NotCreated")
    assert "prefill: starting" in progressing.message


PARSE = """
import dataclasses, json, sys
from vllm_router.launch_router import parse_router_args
parsed = parse_router_args(json.loads(sys.argv[1]))
parsed._validate_router_args()
print(json.dumps(dataclasses.asdict(parsed), default=str))
"""


def test_vllm_router_reads_the_p_d_arguments_as_one_selector_per_role(example_body: dict[str, Any]) -> None:
    from ascend_operator.api.parse import ParsedService
    from ascend_operator.render.desired import router_target
    from ascend_operator.render.router import build_router_args

    spec = parent(example_body, decode={"replicas": 2, "engine": {"maxNumSeqs": 16}})
    assert spec.router is not None
    parsed = ParsedService(name="dsv4", namespace="llm", uid="u", generation=1, spec=spec)
    args = build_router_args(spec.router, router_target(parsed.spec, OWNER))
    assert "--selector" not in args
    out = subprocess.run(["bash", str(REPO / "hack" / "vllm-router.sh")], capture_output=True, text=True, timeout=900)
    python = Path(out.stdout.strip().splitlines()[-1]).parent / "python"
    got = json.loads(
        subprocess.run([str(python), "-c", PARSE, json.dumps(args)], capture_output=True, text=True, check=True).stdout
    )
    assert got["vllm_pd_disaggregation"] is True
    assert got["prefill_selector"] == {"inference.ascend.dev/service": "dsv4-prefill"}
    assert got["decode_selector"] == {"inference.ascend.dev/service": "dsv4-decode"}
    assert got["kv_connector"] == "nixl"  # the contract vllm-ascend's MooncakeConnectorV1 follows
    assert got["max_concurrent_requests"] == 2 * 2 * 16  # units x decode per unit x decode slots


def test_only_the_decode_role_is_judged_on_its_kv_transfers_with_its_own_max_num_seqs(
    example_body: dict[str, Any],
) -> None:
    """health/stall.py `_transfer_stuck` reads `deferred` as KV on the wire only on a decode engine, and only
    while a running slot of its `--max-num-seqs` is free (vllm/v1/core/sched/scheduler.py:640-645)."""
    spec = parent(example_body, prefill={"engine": {"maxNumSeqs": 4}}, decode={"engine": {"maxNumSeqs": 48}})
    assert decode_slots(child(spec, PdRole.DECODE)) == 48
    assert decode_slots(child(spec, PdRole.PREFILL)) is None
    assert decode_slots(parse_resource(example_body).spec) is None


def test_a_malformed_role_status_is_read_once_per_pass(caplog: pytest.LogCaptureFixture) -> None:
    """A role's stored status with a field that does not validate: the field is left out with one warning
    for the pass, however many of the parent's conditions ask about that role."""
    bad = role_body(True, ready_replicas=1)
    bad["status"]["readyReplicas"] = "three"
    bodies: dict[PdRole, dict[str, Any] | None] = {
        PdRole.PREFILL: bad,
        PdRole.DECODE: role_body(True, ready_replicas=1),
    }
    with caplog.at_level(logging.WARNING):
        seen = read_roles(bodies)
        roles = [role_status(r, seen[r], desired=1, group="dsv4") for r in PdRole]
        ready, available, _, _ = pair_conditions(roles, seen)
    assert len(caplog.records) == 1
    assert "readyReplicas" in caplog.records[0].message
    assert roles[0].ready_replicas == 0  # left out: the rest of the role's status still counts
    assert (ready.status, available.status) == ("True", "True")
