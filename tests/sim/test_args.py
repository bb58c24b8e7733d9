"""The simulator accepts `vllm serve` command lines as the renderer and the seed write them."""

from __future__ import annotations

import pytest

from aissim.args import ArgsError, UnrecognizedArguments, parse_serve_args
from aissim.runtime import apply_bind_env

# docs/FACTS.md "Production profile (final)", as a shell would pass it (quotes removed by the shell).
PRODUCTION = [
    "/data/models/DeepSeek-V4-Flash-0731-w8a8",
    "--host", "0.0.0.0", "--port", "8000",
    "--served-model-name", "deepseek-v4-flash",
    "--max-model-len", "327680",
    "--max-num-batched-tokens", "8192",
    "--gpu-memory-utilization", "0.90",
    "--max-num-seqs", "32",
    "--data-parallel-size", "1",
    "--tensor-parallel-size", "8",
    "--enable-expert-parallel",
    "--tokenizer-mode", "deepseek_v4",
    "--tool-call-parser", "deepseek_v4",
    "--enable-auto-tool-choice",
    "--reasoning-parser", "deepseek_v4",
    "--no-disable-hybrid-kv-cache-manager",
    "--enable-prompt-tokens-details",
    '--model-loader-extra-config={"enable_multithread_load":true,"num_threads":128}',
    "--quantization", "ascend",
    "--block-size", "128",
    "--speculative-config", '{"method":"dspark","num_speculative_tokens":7,"enforce_eager":true}',
    "--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY"}',
]  # fmt: skip


def test_production_command_parses_to_the_seed_profile() -> None:
    cfg = parse_serve_args(PRODUCTION, env={})
    assert cfg.model == "/data/models/DeepSeek-V4-Flash-0731-w8a8"
    assert cfg.served_model_names == ("deepseek-v4-flash",)
    assert (cfg.host, cfg.port) == ("0.0.0.0", 8000)
    assert cfg.max_model_len == 327680
    assert cfg.max_num_batched_tokens == 8192
    assert cfg.max_num_seqs == 32
    assert cfg.gpu_memory_utilization == pytest.approx(0.90)
    assert (cfg.tensor_parallel_size, cfg.data_parallel_size) == (8, 1)
    assert cfg.block_size == 128
    assert cfg.enable_prompt_tokens_details
    assert cfg.speculative_config == {"method": "dspark", "num_speculative_tokens": 7, "enforce_eager": True}
    assert cfg.num_speculative_tokens == 7
    assert cfg.compilation_config == {"cudagraph_mode": "FULL_DECODE_ONLY"}
    assert cfg.model_loader_extra_config == {"enable_multithread_load": True, "num_threads": 128}
    assert cfg.known["enable_expert_parallel"] is True
    assert cfg.known["disable_hybrid_kv_cache_manager"] is False
    assert cfg.known["quantization"] == "ascend"
    assert cfg.dropped == ()


def test_unknown_flags_are_refused_as_vllm_refuses_them() -> None:
    argv = [*PRODUCTION, "--some-future-flag", "7", "--another-switch"]
    with pytest.raises(UnrecognizedArguments) as caught:
        parse_serve_args(argv, env={})
    assert str(caught.value) == "vllm serve: error: unrecognized arguments: --some-future-flag 7 --another-switch"


def test_every_vllm_spelling_of_a_known_flag_is_accepted() -> None:
    argv = ["/m", "-tp", "4", "-dp=2", "--max-model", "4096", "--no-enable-prefix-caching", "--seed", "3",
            "--compilation-config.cudagraph_mode", "FULL_DECODE_ONLY", "--enable-log-requests"]  # fmt: skip
    cfg = parse_serve_args(argv, env={})
    assert (cfg.tensor_parallel_size, cfg.data_parallel_size, cfg.max_model_len) == (4, 2, 4096)
    assert cfg.enable_prefix_caching is False
    assert cfg.compilation_config == {"cudagraph_mode": "FULL_DECODE_ONLY"}


@pytest.mark.parametrize(
    ("model_type", "requested", "effective"),
    [("deepseek_v4", 7, 32), ("deepseek_v4", 64, 64), ("deepseek_v4", None, 128), ("qwen3", 16, 128)],
)
def test_block_size_is_rewritten_as_vllm_ascend_does(model_type: str, requested: int | None, effective: int) -> None:
    argv = ["/m", "--sim-model-type", model_type] + ([] if requested is None else ["--block-size", str(requested)])
    cfg = parse_serve_args(argv, env={})
    assert cfg.block_size == effective
    assert cfg.requested_block_size == requested


def test_underscore_spelling_and_rendered_quotes_are_tolerated() -> None:
    argv = ["/m", "--max_model_len", "4096", "--speculative-config='{\"num_speculative_tokens\": 5}'"]
    cfg = parse_serve_args(argv, env={})
    assert cfg.max_model_len == 4096
    assert cfg.num_speculative_tokens == 5


def test_drop_args_removes_flags_as_the_truncated_shell_line_did() -> None:
    argv = [*PRODUCTION, "--sim-drop-args", "--speculative-config,--compilation-config"]
    cfg = parse_serve_args(argv, env={})
    assert cfg.speculative_config is None
    assert cfg.num_speculative_tokens == 0
    assert cfg.compilation_config is None
    assert cfg.block_size == 128  # flags after the dropped ones survive
    assert "--speculative-config" in cfg.dropped
    assert '{"cudagraph_mode":"FULL_DECODE_ONLY"}' in cfg.dropped


def test_env_vars_configure_the_simulator_when_flags_are_absent() -> None:
    env = {
        "AIS_SIM_TIME_SCALE": "60",
        "AIS_SIM_ACCEPTANCE_PROFILE": "synthetic",
        "AIS_SIM_FAULTS": "stall-at-kv:threshold=0.975;hang",
        "AIS_SIM_LOAD_SECONDS": "300",
        "AIS_SIM_DROP_ARGS": "--speculative-config",
    }
    cfg = parse_serve_args(PRODUCTION, env=env)
    assert cfg.sim.time_scale == 60
    assert cfg.sim.acceptance_profile == "synthetic"
    assert cfg.sim.faults == ("stall-at-kv:threshold=0.975", "hang")
    assert cfg.sim.load_seconds == 300
    assert cfg.speculative_config is None
    flagged = parse_serve_args([*PRODUCTION, "--sim-time-scale", "5"], env=env)
    assert flagged.sim.time_scale == 5  # an explicit flag wins over the env


def test_bind_env_moves_an_unchanged_command_to_a_loopback_address() -> None:
    cfg = apply_bind_env(parse_serve_args(PRODUCTION, env={}), {"AIS_SIM_BIND_HOST": "127.3.4.5"})
    assert (cfg.host, cfg.port) == ("127.3.4.5", 8000)


@pytest.mark.parametrize(
    "argv",
    [
        ["--port", "8000"],  # no model
        ["/m", "--speculative-config", "{not json"],
        ["/m", "--sim-time-scale", "0"],
        ["/m", "--sim-acceptance-profile", "optimistic"],
    ],
)
def test_unusable_command_lines_are_rejected(argv: list[str]) -> None:
    with pytest.raises((ArgsError, SystemExit)):
        parse_serve_args(argv, env={})
