"""Each validation rule, exercised with the seed's own numbers (docs/FACTS.md)."""

import re
from typing import Any

import pytest

from ascend_operator.api.parse import SpecError, parse_spec
from ascend_operator.validation import Severity, validate_spec
from ascend_operator.validation.budget import (
    BudgetFit,
    BudgetInput,
    BudgetPlan,
    load_profiles,
    plan_budget,
    startup_need_gib,
)
from ascend_operator.validation.rules import RULES


def _body(**engine: Any) -> dict[str, Any]:
    return {
        "image": "img",
        "model": {
            "path": "/data/models/DeepSeek-V4-Flash-0731-w8a8",
            "servedName": "deepseek-v4-flash",
            "profile": "deepseek-v4-flash-w8a8",
            "source": {"hostPath": {"path": "/data/models/DeepSeek-V4-Flash-0731-w8a8"}},
        },
        "engine": {"maxModelLen": 327680, **engine},
    }


def _plan(
    *,
    mbt: int = 8192,
    max_model_len: int = 327680,
    tensor: int = 8,
    data: int = 1,
    util: float = 0.90,
    long_context: bool = False,
) -> BudgetPlan:
    return plan_budget(
        BudgetInput(
            profile="deepseek-v4-flash-w8a8",
            tensor=tensor,
            data=data,
            utilization=util,
            max_model_len=max_model_len,
            max_num_batched_tokens=mbt,
            long_context=long_context,
        )
    )


def _rules(body: dict[str, Any], severity: Severity = Severity.ERROR) -> list[str]:
    return [f.rule for f in validate_spec(parse_spec(body)) if f.severity is severity]


def test_production_profile_has_no_error_or_warning() -> None:
    findings = validate_spec(parse_spec(_body(speculative={"method": "dspark", "numSpeculativeTokens": 7})))
    assert findings == []


@pytest.mark.parametrize(
    ("tensor", "data", "npus", "ok"),
    [(8, 1, 8, True), (4, 2, 8, True), (4, 1, 8, False), (8, 2, 8, False), (2, 2, 4, True)],
)
def test_tensor_times_data_must_equal_npus(tensor: int, data: int, npus: int, ok: bool) -> None:
    body = _body()
    body.update(npus=npus, parallelism={"tensor": tensor, "data": data})
    assert ("ParallelismMatchesNPUs" not in _rules(body)) is ok


def test_dspark7_passes_and_dspark5_is_rejected_on_tp8_with_long_context() -> None:
    seven = _body(longContext={"enabled": True}, speculative={"method": "dspark", "numSpeculativeTokens": 7})
    five = _body(longContext={"enabled": True}, speculative={"method": "dspark", "numSpeculativeTokens": 5})
    assert "LongContextGraphWidth" not in _rules(seven)
    findings = [f for f in validate_spec(parse_spec(five)) if f.rule == "LongContextGraphWidth"]
    assert len(findings) == 1
    assert findings[0].field == "spec.engine.speculative.numSpeculativeTokens"
    assert "DSpark5 -> width 6 does not" in findings[0].message


def test_dspark5_without_long_context_is_fine() -> None:
    assert "LongContextGraphWidth" not in _rules(_body(speculative={"method": "dspark", "numSpeculativeTokens": 5}))


def test_mc2_switches_warn_with_32_experts_per_device_on_ep8() -> None:
    body = _body(additionalConfig={"enablePrefillMc2": True, "enableFusedMc2": True})
    warnings = [f for f in validate_spec(parse_spec(body)) if f.severity is Severity.WARNING]
    assert [w.rule for w in warnings] == ["MC2Preconditions"]
    assert "256 experts / EP8 = 32 per device" in warnings[0].message
    assert "ALLGATHER" in warnings[0].message


def test_reduce_sample_with_dspark_is_rejected() -> None:
    body = _body(
        additionalConfig={"enableReduceSample": True},
        speculative={"method": "dspark", "numSpeculativeTokens": 7},
    )
    assert "ReduceSampleWithDSpark" in _rules(body)
    assert "ReduceSampleWithDSpark" not in _rules(_body(additionalConfig={"enableReduceSample": True}))


@pytest.mark.parametrize("key", ["torchair_graph_config", "ascend_scheduler_config"])
def test_keys_removed_upstream_are_rejected(key: str) -> None:
    assert "RemovedAdditionalConfigKey" in _rules(_body(additionalConfig={"extra": {key: {"enabled": True}}}))


def test_typed_keys_may_not_hide_in_extra() -> None:
    assert "TypedAdditionalConfigKey" in _rules(_body(additionalConfig={"extra": {"enable_prefill_mc2": True}}))


@pytest.mark.parametrize(
    ("extra", "ok"),
    [
        (["--max-model-len", "4096"], False),
        (["--max-model-len=4096"], False),
        (["--no-enable-expert-parallel"], False),
        (["-tp", "4"], False),
        (["--speculative-config", "{}"], False),
        (["-sc", "{}"], False),
        (["--spec-tokens", "3"], False),
        (["--speculative_config.method", "mtp"], False),
        (["--max_model_len=4096"], False),
        (["--no-async-scheduling"], False),
        (["--seed", "0", "--enable-log-requests"], True),
    ],
)
def test_extra_args_may_not_repeat_typed_flags(extra: list[str], ok: bool) -> None:
    assert ("ExtraArgsRepeatTypedFlag" not in _rules(_body(extraArgs=extra))) is ok


@pytest.mark.parametrize(
    ("extra", "cel_matches"),
    [
        ("-sc", True),
        ("--speculative_config.method", True),
        ("--max_model_len=4096", True),
        ("--no-async-scheduling", True),
        ("--seed", False),
        ("--served-model-names", False),
    ],
)
def test_cel_twin_of_the_repeat_rule_agrees(extra: str, cel_matches: bool) -> None:
    """The CEL regex is RE2; this one uses only the subset Python's re reads the same way."""
    rule = next(r for r in RULES if r.name == "ExtraArgsRepeatTypedFlag")
    assert rule.cel is not None
    pattern = rule.cel.split(".matches('", 1)[1].rsplit("')", 1)[0]
    assert (re.match(pattern, extra) is not None) is cel_matches
    assert ("ExtraArgsRepeatTypedFlag" in _rules(_body(extraArgs=[extra, "1"]))) is cel_matches


def test_unknown_extra_arg_is_refused_naming_the_flag() -> None:
    findings = validate_spec(parse_spec(_body(extraArgs=["--no-such-flag", "--seed", "0"])))
    unknown = [f for f in findings if f.rule == "ExtraArgsUnknownFlag"]
    assert len(unknown) == 1
    assert unknown[0].field == "spec.engine.extraArgs"
    assert "--no-such-flag" in unknown[0].message
    assert "--seed" not in unknown[0].message.split("unknown:")[1]


@pytest.mark.parametrize(
    "extra",
    [
        ["--no-enable-mamba-cache-stochastic-rounding"],  # BooleanOptional (MambaConfig.enable_stochastic_rounding)
        ["--enable-mamba-cache-stochastic-rounding"],
        ["--hf-overrides.rope_scaling.factor", "4"],  # dotted keys of a dict-typed flag
        ["--hf-overrides.max_position_embeddings=65536"],
        ["--hf_overrides", '{"max_position_embeddings": 65536}'],
        ["--limit-mm-per-prompt.image", "2"],
        ["--limit-mm-per-prompt.video=0"],
        ["--quantization-config.ignore+", "lm_head"],
        ["--quantization-config", "{}"],
    ],
)
def test_forms_vllm_accepts_pass(extra: list[str]) -> None:
    """vLLM 0.25.1's FlexibleArgumentParser accepts these (vllm/utils/argparse_utils.py:388-424)."""
    findings = [f for f in validate_spec(parse_spec(_body(extraArgs=extra))) if f.field == "spec.engine.extraArgs"]
    assert findings == []


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--no-such-flag"], "--no-such-flag"),
        (["--no-hf-overrides"], "--no-hf-overrides"),  # a dict flag has no --no- twin
        (["--port.x", "1"], "--port.x"),  # dotted keys on an int flag: argparse refuses the JSON
        (["--no-limit-mm-per-prompt"], "--no-limit-mm-per-prompt"),
    ],
)
def test_unknown_flag_is_refused_naming_the_field_and_the_rule(extra: list[str], named: str) -> None:
    (finding,) = [f for f in validate_spec(parse_spec(_body(extraArgs=extra))) if f.field == "spec.engine.extraArgs"]
    assert finding.rule == "ExtraArgsUnknownFlag"
    assert str(finding).startswith("error: spec.engine.extraArgs: ")
    assert str(finding).endswith(f"(unknown: {named}) [ExtraArgsUnknownFlag]")


@pytest.mark.parametrize(
    ("extra", "rule", "why"),
    [
        (["--disable-log-stats"], "ExtraArgsSilenceMetrics", "no vllm:* series"),
        (["--disable_log_stats"], "ExtraArgsSilenceMetrics", "no vllm:* series"),
        (["--disable-log-st"], "ExtraArgsSilenceMetrics", "no vllm:* series"),  # argparse's allow_abbrev
        (["--grpc"], "ExtraArgsReplaceHttpServer", "speak plain HTTP"),
        (["--uds", "/tmp/engine.sock"], "ExtraArgsReplaceHttpServer", "unix socket"),
        (["--uds=/tmp/engine.sock"], "ExtraArgsReplaceHttpServer", "unix socket"),
        (["--ssl-keyfile", "/k", "--ssl-certfile=/c"], "ExtraArgsReplaceHttpServer", "HTTPS"),
        (["--skip-tokenizer-init"], "ExtraArgsBreakCanary", "canary's text prompt"),
        (["--tokens_only"], "ExtraArgsBreakCanary", "canary's text prompt"),
    ],
)
def test_flags_that_blind_the_operator_are_refused_saying_why(extra: list[str], rule: str, why: str) -> None:
    for version in (None, "0.30.0"):  # not a matter of the engine version
        body = _body(extraArgs=extra, **({"engineVersion": version} if version else {}))
        (finding,) = [f for f in validate_spec(parse_spec(body)) if f.field == "spec.engine.extraArgs"]
        assert finding.rule == rule
        assert why in finding.message
        assert finding.message.endswith("(offending: " + " ".join(a for a in extra if a.startswith("-")) + ")")


@pytest.mark.parametrize(
    ("extra", "refused"),
    [
        ("--disable-log-stats", True),
        ("--disable_log_st", True),
        ("--grpc", True),
        ("--gr", True),
        ("--uds=/tmp/x.sock", True),
        ("--ssl-keyfile=/k", True),
        ("--ssl_certfile", True),
        ("--skip-tokenizer-init", True),
        ("--tokens-only", True),
        ("--no-skip-tokenizer-init", False),  # the default, harmless
        ("--no-tokens-only", False),
        ("--ssl-ca-certs", False),  # inert without a key and a cert
        ("--disable-uvicorn-access-log", False),
        ("--enable-log-requests", False),
        ("--api-server-count=2", False),
        ("/tmp/grpc", False),
    ],
)
def test_cel_twins_of_the_surface_rules_agree_with_python(extra: str, refused: bool) -> None:
    """What `kubectl apply` refuses is what the operator refuses (RE2 patterns in Python's re subset)."""
    surface = [
        r for r in RULES if r.name in ("ExtraArgsSilenceMetrics", "ExtraArgsReplaceHttpServer", "ExtraArgsBreakCanary")
    ]
    patterns = [r.cel.split(".matches('", 1)[1].rsplit("')", 1)[0] for r in surface if r.cel]
    assert len(patterns) == 3
    assert any(re.match(p, extra) for p in patterns) is refused
    rules = {f.rule for f in validate_spec(parse_spec(_body(extraArgs=["--seed", extra])))}
    assert bool(rules & {r.name for r in surface}) is refused


def test_engine_version_is_the_escape_hatch_for_newer_flags() -> None:
    newer = _body(extraArgs=["--flag-of-vllm-0-30"], engineVersion="0.30.0")
    assert "ExtraArgsUnknownFlag" not in _rules(newer)
    assert "ExtraArgsUnknownFlag" in _rules(_body(extraArgs=["--flag-of-vllm-0-30"], engineVersion="0.25.1"))
    # A newer engine still may not repeat a typed flag.
    assert "ExtraArgsRepeatTypedFlag" in _rules(_body(extraArgs=["-sc", "{}"], engineVersion="0.30.0"))


@pytest.mark.parametrize(("block", "ok"), [(7, False), (16, False), (256, False), (32, True), (64, True), (128, True)])
def test_block_size_on_deepseek_v4_is_one_vllm_ascend_keeps(block: int, ok: bool) -> None:
    findings = [f for f in validate_spec(parse_spec(_body(blockSize=block))) if f.rule == "BlockSizeKeptByVllmAscend"]
    assert (not findings) is ok
    if not ok:
        assert findings[0].field == "spec.engine.blockSize"
        assert f"{block} would run as 32" in findings[0].message


def test_block_size_of_an_unknown_model_is_not_guessed() -> None:
    body = _body(blockSize=7)
    del body["model"]["profile"]
    assert "BlockSizeKeptByVllmAscend" not in _rules(body)


def test_batched_tokens_must_cover_running_sequences() -> None:
    assert "BatchedTokensCoverSeqs" in _rules(_body(maxNumBatchedTokens=16, maxNumSeqs=32))


def test_model_source_needs_exactly_one_origin() -> None:
    body = _body()
    body["model"]["source"] = {"hostPath": {"path": "/m"}, "pvc": {"claimName": "w"}}
    assert "ModelSourceExactlyOne" in _rules(body)
    body["model"]["source"] = {}
    assert "ModelSourceExactlyOne" in _rules(body)


def test_npus_may_not_be_requested_through_resources() -> None:
    body = _body()
    body["resources"] = {"limits": {"huawei.com/Ascend910": "8"}}
    assert "NPUsFromSpec" in _rules(body)


def test_duplicate_env_names_are_rejected() -> None:
    body = _body()
    body["env"] = [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]
    assert "EnvNamesUnique" in _rules(body)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "spec.engine.gpuMemoryUtilization: Input should be greater than 0"),
        (1.1, "spec.engine.gpuMemoryUtilization: Input should be less than or equal to 1"),
    ],
)
def test_ranges_name_the_field(value: float, message: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(_body(gpuMemoryUtilization=value))
    assert message in err.value.problems


def test_unknown_field_is_named() -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(_body(maxModelLength=4096))
    assert "spec.engine.maxModelLength: unknown field; did you mean 'maxModelLen'?" in err.value.problems


# docs/FACTS.md "Memory / KV budget": at ~512K (the table's baseline) and at the production 327680:
# MBT 8192 fits, 16384 is tight, 32768 cannot start.
@pytest.mark.parametrize("max_model_len", [327680, 524288])
@pytest.mark.parametrize(
    ("mbt", "verdict"), [(8192, BudgetFit.FITS), (16384, BudgetFit.TIGHT), (32768, BudgetFit.CANNOT_START)]
)
def test_mbt_table(max_model_len: int, mbt: int, verdict: BudgetFit) -> None:
    assert _plan(mbt=mbt, max_model_len=max_model_len).verdict is verdict


def test_budget_errors_and_warnings_reach_validation() -> None:
    assert "HBMBudget" in _rules(_body(maxNumBatchedTokens=32768))
    assert "HBMBudget" in _rules(_body(maxNumBatchedTokens=16384), Severity.WARNING)
    assert "HBMBudget" not in _rules(_body(maxNumBatchedTokens=8192), Severity.WARNING)


@pytest.mark.parametrize(("mbt", "seed_gib"), [(8192, 8.6), (16384, 12.9), (32768, 21.6)])
def test_fitted_requirement_reproduces_the_seed_table_at_512k(mbt: int, seed_gib: float) -> None:
    profile = load_profiles()["deepseek-v4-flash-w8a8"]
    need = startup_need_gib(profile, max_model_len=524_288, max_num_batched_tokens=mbt)
    assert need == pytest.approx(seed_gib, abs=0.3)


def test_plan_reports_the_seed_kv_pool_and_max_length_requests() -> None:
    plan = _plan()
    assert plan.free_kv_gib == pytest.approx(13.8)
    assert plan.kv_pool_tokens == 1_078_120
    assert plan.max_len_requests == 1  # 1.078M // (327680 x 2.03): the hybrid KV (the profile's cost per token)


def test_max_length_requests_say_what_the_seed_saw_a_512k_prompt_do() -> None:
    """docs/FACTS.md: on baseline TP8 a 512K prompt completed; with DSA-CP (pool ~969K) the same prompt drove
    KV usage to 97.5% and never finished. Counting one pool token per context token would have said 2 and 1."""
    assert _plan(max_model_len=524_288).max_len_requests == 1
    assert _plan(max_model_len=524_288, long_context=True).max_len_requests == 0


def test_long_context_and_dp2_pools_follow_the_seed() -> None:
    assert _plan(long_context=True).kv_pool_tokens == 969_000
    assert _plan(tensor=4, data=2).kv_pool_tokens == 941_000
    assert _plan(tensor=4, data=2, long_context=True).kv_pool_tokens == 799_000
    assert _plan(tensor=4, data=2).free_kv_gib == pytest.approx(12.1)


def test_lower_utilization_shrinks_the_pool_and_can_stop_the_start() -> None:
    pool = _plan(util=0.85).kv_pool_tokens
    assert pool is not None
    assert pool < 1_078_120
    assert _plan(util=0.60).verdict is BudgetFit.CANNOT_START  # 0.60 x 62 GiB < 42 GiB of weights and graphs


def test_unknown_model_is_skipped_with_a_note_never_guessed() -> None:
    body = _body(maxNumBatchedTokens=32768)
    body["model"]["profile"] = "qwen3-235b"
    findings = [f for f in validate_spec(parse_spec(body)) if f.rule == "HBMBudget"]
    assert [f.severity for f in findings] == [Severity.NOTE]
    assert "unknown model profile 'qwen3-235b'" in findings[0].message


@pytest.mark.parametrize(
    ("autoscaling", "refused"),
    [
        ({"minReplicas": 1, "maxReplicas": 3}, []),
        ({"minReplicas": 2, "maxReplicas": 2}, []),
        ({"minReplicas": 3, "maxReplicas": 2}, ["AutoscalingBounds"]),
    ],
)
def test_autoscaling_bounds(autoscaling: dict[str, Any], refused: list[str]) -> None:
    found = [r for r in _rules({**_body(), "autoscaling": autoscaling}) if r.startswith("Autoscaling")]
    assert found == refused


def test_autoscaling_min_replicas_is_at_least_one() -> None:
    with pytest.raises(SpecError, match="minReplicas"):
        parse_spec({**_body(), "autoscaling": {"minReplicas": 0, "maxReplicas": 2}})
