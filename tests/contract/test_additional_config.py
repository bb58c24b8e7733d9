"""The contract's vllm-ascend additional-config keys and block-size rule against vllm-ascend 0.25.1rc1."""

import re

import pytest

from ascend_operator.contract import additional_config as K
from tests.contract.upstream import read_upstream, source_dirs


def _ascend_python() -> str:
    _, ascend = source_dirs()
    return "\n".join(p.read_text() for p in sorted((ascend / "vllm_ascend").rglob("*.py")))


@pytest.mark.parametrize("key", K.TYPED, ids=lambda k: k.name)
def test_key_is_read_where_cited(key: K.Key) -> None:
    rel, _, line = key.source.rpartition(":")
    text = read_upstream(rel, ascend=True).splitlines()[int(line) - 1]
    assert f'"{key.name}"' in text, f"{key.source} does not read {key.name}: {text!r}"


@pytest.mark.parametrize("name", K.REMOVED)
def test_removed_key_is_read_nowhere(name: str) -> None:
    assert not re.search(rf"[\"']{name}[\"']", _ascend_python()), f"vllm_ascend still reads {name}"


def test_dsa_cp_needs_flashcomm1_as_the_tutorial_sets() -> None:
    utils = read_upstream("vllm_ascend/utils.py", ascend=True)
    assert "if dsa_cp_enable and not enable_sp():" in utils
    tutorial = read_upstream("docs/source/tutorials/models/DeepSeek-V4-Flash-DSpark.md", ascend=True)
    assert '"enable_dsa_cp": true' in tutorial
    assert '"enable_flashcomm1": true' in tutorial
    assert {k.name for k in K.LONG_CONTEXT} == {"enable_dsa_cp", "enable_flashcomm1"}


def test_block_size_rule_matches_refresh_block_size() -> None:
    utils = read_upstream("vllm_ascend/utils.py", ascend=True)
    _rel, _, line = K.BLOCK_SIZE_SOURCE.rpartition(":")
    assert utils.splitlines()[int(line) - 1].startswith("def refresh_block_size(")
    body = utils[utils.index("def refresh_block_size(") :][:2500]
    assert 'if model_config.hf_config.model_type == "deepseek_v4":' in body
    assert "elif cache_config.block_size not in [32, 64, 128]:" in body
    assert "cache_config.block_size = 32" in body
    assert "if cache_config.enable_prefix_caching or scheduler_config.enable_chunked_prefill:" in body
    assert "refresh_block_size(vllm_config)" in read_upstream("vllm_ascend/platform.py", ascend=True)
    assert [K.effective_block_size(b, model_type="deepseek_v4") for b in (7, 32, 64, 128, 256)] == [32, 32, 64, 128, 32]
    assert [K.effective_block_size(b, model_type="qwen3") for b in (7, 128)] == [128, 128]
