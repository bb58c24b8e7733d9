"""The `vllm serve` command line, as an argument list.

Never a shell string: the seed lost `--speculative-config` to a comment inside a continued shell line and
the server still started (docs/FACTS.md "Operations"). JSON-valued flags are compact JSON.
"""

import json
from typing import Any

from ascend_operator.api.spec import AscendInferenceServiceSpec

ENGINE_COMMAND = ["vllm"]
LISTEN_HOST = "0.0.0.0"

#: Every flag a typed field renders, with the spellings vLLM also accepts for it (BooleanOptionalAction
#: negations, short aliases). `spec.engine.extraArgs` may not repeat any of them: a second value would
#: silently win or lose depending on argparse order.
RENDERED_FLAGS: frozenset[str] = frozenset(
    {
        "--model", "--host", "--port", "--served-model-name", "--max-model-len",
        "--max-num-batched-tokens", "--gpu-memory-utilization", "--max-num-seqs",
        "--data-parallel-size", "-dp", "--tensor-parallel-size", "-tp",
        "--enable-expert-parallel", "--no-enable-expert-parallel", "-ep",
        "--tokenizer-mode", "--tool-call-parser", "--enable-auto-tool-choice", "--no-enable-auto-tool-choice",
        "--reasoning-parser", "--disable-hybrid-kv-cache-manager", "--no-disable-hybrid-kv-cache-manager",
        "--enable-prompt-tokens-details", "--no-enable-prompt-tokens-details",
        "--model-loader-extra-config", "--quantization", "-q", "--block-size",
        "--speculative-config", "--compilation-config", "-O", "-cc", "--additional-config",
        "--async-scheduling", "--no-async-scheduling",
        # multi-node groups (render/group.py), vLLM 0.25.1 vllm/engine/arg_utils.py:1034-1066
        "--data-parallel-size-local", "-dpl", "--data-parallel-address", "-dpa",
        "--data-parallel-rpc-port", "-dpp", "--data-parallel-start-rank", "-dpr", "--headless",
    }
)  # fmt: skip


def compact_json(value: Any) -> str:
    """JSON with no spaces, as the seed's command writes it."""
    return json.dumps(value, separators=(",", ":"))


def decimal(value: float) -> str:
    """A fraction as the seed writes it (0.90), exact for any other value."""
    return f"{value:.2f}" if round(value, 2) == value else repr(value)


def speculative_config(spec: AscendInferenceServiceSpec) -> dict[str, Any] | None:
    """The `--speculative-config` object, keys in the seed's order."""
    spec_dec = spec.engine.speculative
    if spec_dec is None:
        return None
    return spec_dec.model_dump(mode="json", exclude_none=True)


def additional_config(spec: AscendInferenceServiceSpec) -> dict[str, Any]:
    """The vllm-ascend `--additional-config` object: typed keys, the long-context switches, passthrough."""
    addl = spec.engine.additional_config
    config: dict[str, Any] = addl.model_dump(mode="json", exclude_none=True, exclude={"extra"})
    if spec.engine.long_context.enabled:
        # vllm-ascend additional_config.md: `enable_context_parallel` (was VLLM_ASCEND_ENABLE_CONTEXT_PARALLEL)
        # and `enable_flashcomm1` (was VLLM_ASCEND_ENABLE_FLASHCOMM1) turn on the DSA-CP / FlashComm path.
        config["enable_context_parallel"] = True
        config["enable_flashcomm1"] = True
    config.update(addl.extra)
    return config


def build_engine_args(spec: AscendInferenceServiceSpec) -> list[str]:
    """The container args after `vllm`: `serve MODEL --flag value ...`, in the seed's order."""
    eng, par = spec.engine, spec.parallelism
    args = ["serve", spec.model.path, "--host", LISTEN_HOST, "--port", str(eng.port)]
    args += ["--served-model-name", spec.model.served_name]
    if eng.max_model_len is not None:
        args += ["--max-model-len", str(eng.max_model_len)]
    args += ["--max-num-batched-tokens", str(eng.max_num_batched_tokens)]
    args += ["--gpu-memory-utilization", decimal(eng.gpu_memory_utilization)]
    args += ["--max-num-seqs", str(eng.max_num_seqs)]
    args += ["--data-parallel-size", str(par.data), "--tensor-parallel-size", str(par.tensor)]
    if par.expert:
        args.append("--enable-expert-parallel")
    if eng.tokenizer_mode is not None:
        args += ["--tokenizer-mode", eng.tokenizer_mode]
    if eng.tool_call_parser is not None:
        args += ["--tool-call-parser", eng.tool_call_parser]
    if eng.enable_auto_tool_choice:
        args.append("--enable-auto-tool-choice")
    if eng.reasoning_parser is not None:
        args += ["--reasoning-parser", eng.reasoning_parser]
    if eng.hybrid_kv_cache_manager is not None:
        no = "no-" if eng.hybrid_kv_cache_manager else ""
        args.append(f"--{no}disable-hybrid-kv-cache-manager")
    if eng.enable_prompt_tokens_details:
        args.append("--enable-prompt-tokens-details")
    if eng.model_loader is not None:
        loader = eng.model_loader.model_dump(mode="json", exclude_none=True)
        args += ["--model-loader-extra-config", compact_json(loader)]
    if spec.model.quantization is not None:
        args += ["--quantization", spec.model.quantization]
    args += ["--block-size", str(eng.block_size)]
    speculative = speculative_config(spec)
    if speculative is not None:
        args += ["--speculative-config", compact_json(speculative)]
    if eng.compilation is not None:
        args += [
            "--compilation-config",
            compact_json(eng.compilation.model_dump(mode="json", exclude_none=True)),
        ]
    addl = additional_config(spec)
    if addl:
        args += ["--additional-config", compact_json(addl)]
    if eng.async_scheduling:
        args.append("--async-scheduling")
    return args + list(eng.extra_args)


def flag_name(arg: str) -> str | None:
    """The flag an argument item spells (`--a=b` -> `--a`), or None for a value."""
    if not arg.startswith("-") or arg == "-" or _is_number(arg):
        return None
    return arg.split("=", 1)[0]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
