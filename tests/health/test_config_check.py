"""The effective-config check: the seed's `speculative_config=None` behind a 200 is a ConfigMismatch."""

from pathlib import Path

import yaml

from ascend_operator.api.parse import parse_resource
from ascend_operator.health.config import check_config, expected_config
from ascend_operator.health.samples import EngineSample

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dsv4-flash.yaml"
EXPECTED = expected_config(parse_resource(yaml.safe_load(EXAMPLE.read_text())).spec)
MODELS = {"data": [{"id": "deepseek-v4-flash", "max_model_len": 327680}]}
CACHE = {"block_size": "128", "gpu_memory_utilization": "0.9", "engine": "0"}


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
