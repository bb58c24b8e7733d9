"""The real engine gets the pod's own args, less exactly what only an NPU can honour (aissim/realengine.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aissim import realengine, tinymodel
from ascend_operator.api.parse import ParsedService
from ascend_operator.render.pod import Owner, build_pod


def pod_args(example: ParsedService) -> list[str]:
    pod = build_pod(example.spec, owner=Owner(name="dsv4-flash", namespace="llm"), replica=0)
    args: list[str] = pod["spec"]["containers"][0]["args"]
    assert args[0] == "vllm"
    return args[1:]


def flag_value(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_the_production_profile_reaches_vllm_less_only_the_npu_flags(example: ParsedService, tmp_path: Path) -> None:
    args = pod_args(example)
    out = realengine.translate(args, model_dir=tmp_path, host="127.10.0.7", port=8000)
    assert out[:2] == ["--model", str(tmp_path)]
    # what the operator's health checks compare reaches the engine unchanged
    for flag in ("--served-model-name", "--max-model-len", "--max-num-batched-tokens", "--max-num-seqs"):
        assert flag_value(out, flag) == flag_value(args, flag), flag
    for flag in ("--block-size", "--gpu-memory-utilization", "--tokenizer-mode", "--reasoning-parser"):
        assert flag_value(out, flag) == flag_value(args, flag), flag
    assert "--no-async-scheduling" in out
    assert "--enable-prompt-tokens-details" in out
    # Ascend-only flags are gone with their values; parallelism is one CPU worker
    for flag in ("--quantization", "--speculative-config", "--compilation-config", "--model-loader-extra-config"):
        assert flag not in out, flag
    assert "ascend" not in out
    assert "--enable-expert-parallel" not in out
    assert flag_value(out, "--tensor-parallel-size") == "1"
    # dummy weights, eager, and the pod's address instead of 0.0.0.0
    assert out[-4:] == ["--host", "127.10.0.7", "--port", "8000"]
    assert flag_value(out, "--load-format") == "dummy"
    assert out.count("--host") == 1
    assert "--enforce-eager" in out


def test_inline_values_and_the_drop_args_fault(example: ParsedService, tmp_path: Path) -> None:
    args = [*pod_args(example), '--additional-config={"x": 1}']
    out = realengine.translate(args, model_dir=tmp_path, host="127.0.0.9", port=9000, drop=["--max-model-len"])
    assert not any(a.startswith("--additional-config") for a in out)
    assert "--max-model-len" not in out
    assert "327680" not in out  # its value went with it
    assert flag_value(out, "--max-num-seqs") == "32"  # and nothing after it


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "m"], "not a `vllm serve"),
        (["serve", "m", "--headless", "--data-parallel-address", "10.0.0.1"], "multi-node"),
    ],
)
def test_what_the_cpu_engine_cannot_stand_in_for_is_refused(args: list[str], needle: str, tmp_path: Path) -> None:
    with pytest.raises(realengine.Untranslatable, match=needle):
        realengine.translate(args, model_dir=tmp_path, host="127.0.0.1", port=1)


def test_every_engine_is_loopback_only_and_gets_no_ascend_env() -> None:
    env = realengine.environment({"PATH": "/bin", "VLLM_HOST_IP": "10.1.2.3"}, {"VLLM_API_KEY": "k"})
    assert env["VLLM_HOST_IP"] == "127.0.0.1"
    assert env["VLLM_API_KEY"] == "k"
    assert "LD_PRELOAD" not in env


def test_the_tiny_model_counts_one_token_per_byte_and_holds_the_profile_length(tmp_path: Path) -> None:
    model = tinymodel.ensure(tmp_path)
    assert tinymodel.ensure(tmp_path) == model  # made once, named by its content
    config = json.loads((model / "config.json").read_text())
    assert config["max_position_embeddings"] >= 327680
    assert config["hidden_size"] // config["num_attention_heads"] == 64  # CPU attention refuses head_dim 16
    tok = json.loads((model / "tokenizer.json").read_text())
    assert len(tok["model"]["vocab"]) == 256
    assert tok["model"]["merges"] == []
    ids = [t["id"] for t in tok["added_tokens"]]
    assert ids == list(range(256, 256 + len(tinymodel.SPECIAL_TOKENS)))
    assert max(ids) < config["vocab_size"]
    assert {"<think>", "</think>"} <= {t["content"] for t in tok["added_tokens"]}


def test_the_documented_translation_table_is_the_one_the_code_applies() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "real-engine.md").read_text()
    table = doc.split("<!-- table:start -->\n", 1)[1].split("<!-- table:end -->", 1)[0]
    assert table == realengine.table_markdown()
