"""The effective-config check: the seed's `speculative_config=None` behind a 200 is a ConfigMismatch, and a
healthy engine is never one (DeepSeek-V4 reports its smallest KV cache group as its block size)."""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from ascend_operator.api.parse import parse_resource
from ascend_operator.health.config import check_config, expected_config
from ascend_operator.health.samples import EngineSample

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dsv4-flash.yaml"
BODY: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
EXPECTED = expected_config(parse_resource(BODY).spec)
MODELS = {"data": [{"id": "deepseek-v4-flash", "max_model_len": 327680}]}
# What vLLM 0.25.1 + vllm-ascend 0.25.1rc1 report for DeepSeek-V4 at --block-size 128: the C4 state group's 8.
CACHE = {"block_size": "8", "user_specified_block_size": "True", "gpu_memory_utilization": "0.9", "engine": "0"}


def expected(**engine: Any) -> Any:
    """The example's expectations with some engine fields changed (None removes the model profile)."""
    body = copy.deepcopy(BODY)
    if engine.pop("profile", "keep") is None:
        del body["spec"]["model"]["profile"]
    body["spec"]["engine"].update(engine)
    return expected_config(parse_resource(body).spec)


def sample(*, positions: int | None = 7, cache: dict[str, str] = CACHE) -> EngineSample:
    spec = positions is not None
    return EngineSample(
        t=0,
        spec_drafts=10.0 if spec else None,
        spec_accepted=5.0 if spec else None,
        spec_accepted_per_pos=dict.fromkeys(range(positions), 1.0) if spec and positions else None,
        cache_config=cache,
    )


def test_engine_running_the_production_profile_matches() -> None:
    assert check_config(EXPECTED, models=MODELS, sample=sample()) == []


def test_dropped_speculative_config_is_a_mismatch() -> None:
    found = check_config(EXPECTED, models=MODELS, sample=sample(positions=None))
    assert [str(m) for m in found] == ["speculative: expected 7 draft tokens, engine reports off"]


def test_wrong_draft_count_max_len_name_block_and_memory() -> None:
    assert [m.field for m in check_config(EXPECTED, models=MODELS, sample=sample(positions=5))] == [
        "speculative.numSpeculativeTokens"
    ]
    short = {"data": [{"id": "deepseek-v4-flash", "max_model_len": 131072}]}
    assert [m.field for m in check_config(EXPECTED, models=short, sample=sample())] == ["maxModelLen"]
    other = {"data": [{"id": "qwen", "max_model_len": 327680}]}
    assert [str(m) for m in check_config(EXPECTED, models=other, sample=sample())] == [
        "servedName: expected deepseek-v4-flash, engine reports qwen"
    ]
    wrong = {"block_size": "16", "gpu_memory_utilization": "0.8"}
    assert [m.field for m in check_config(EXPECTED, models=MODELS, sample=sample(cache=wrong))] == [
        "blockSize",
        "gpuMemoryUtilization",
    ]


@pytest.mark.parametrize(("asked", "reported"), [(128, "8"), (64, "4"), (32, "2")])
def test_deepseek_v4_reports_its_smallest_kv_cache_group_and_is_not_a_mismatch(asked: int, reported: str) -> None:
    cache = {**CACHE, "block_size": reported}
    assert check_config(expected(blockSize=asked), models=MODELS, sample=sample(cache=cache)) == []


def test_deepseek_v4_is_held_to_its_kv_layout_or_the_flag_itself() -> None:
    asked = sample(cache={**CACHE, "block_size": "128"})  # one group: not misconfigured, whatever the model
    assert check_config(EXPECTED, models=MODELS, sample=asked) == []
    found = check_config(EXPECTED, models=MODELS, sample=sample(cache={**CACHE, "block_size": "2"}))
    assert [str(m) for m in found] == [
        "blockSize: expected 8 (the smallest KV cache group at --block-size 128) or 128, engine reports 2"
    ]


@pytest.mark.parametrize("reported", ["128", "64", "8", "544"])
def test_a_model_of_unknown_kv_layout_is_not_held_out_for_its_block_size(reported: str) -> None:
    """vllm-ascend rewrites 64 to 128 on a plain model, a DeepSeek-V4-like layout reports less, a mamba
    hybrid more: without the model's KV groups no value is certain, so none is a mismatch."""
    cache = {**CACHE, "block_size": reported}
    for unknown in (expected(profile=None, blockSize=64), expected(blockSize=64, engineVersion="0.26.0")):
        assert check_config(unknown, models=MODELS, sample=sample(cache=cache)) == []


def test_a_dropped_block_size_flag_is_a_mismatch_for_any_model() -> None:
    cache = {**CACHE, "block_size": "128", "user_specified_block_size": "False"}
    for spec in (EXPECTED, expected(profile=None)):
        found = check_config(spec, models=MODELS, sample=sample(cache=cache))
        assert [str(m) for m in found] == ["blockSize: expected --block-size 128, engine reports its default 128"]
