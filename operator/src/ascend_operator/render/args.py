"""The `vllm serve` command line, as an argument list.

Never a shell string: the seed lost `--speculative-config` to a comment inside a continued shell line and
the server still started (docs/FACTS.md "Operations"). Every flag comes from the engine contract
(`ascend_operator.contract.flags`), so the spelling, the form (`--no-x` for an off switch) and the list of
flags extraArgs may not repeat are one fact. JSON-valued flags are compact JSON.
"""

import json
from typing import Any

from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.contract import additional_config as keys
from ascend_operator.contract import flags as F

#: The engine's command, rendered as the first container args (the pod keeps the image's ENTRYPOINT).
#: vllm-ascend v0.25.1rc1's Dockerfile sets no ENTRYPOINT and ends in CMD ["/bin/bash"] (Dockerfile:78).
ENGINE_COMMAND = ["vllm"]
LISTEN_HOST = "0.0.0.0"


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
        # DSA-CP is `enable_dsa_cp` and needs FlashComm1 on (contract.additional_config.LONG_CONTEXT).
        config.update({key.name: True for key in keys.LONG_CONTEXT})
    config.update(addl.extra)
    return config


def build_engine_args(spec: AscendInferenceServiceSpec) -> list[str]:
    """The container args after `vllm`: `serve MODEL --flag value ...`, in the seed's order."""
    eng, par = spec.engine, spec.parallelism
    args = ["serve", spec.model.path, *F.HOST.value(LISTEN_HOST), *F.PORT.value(eng.port)]
    args += F.SERVED_MODEL_NAME.value(spec.model.served_name)
    if eng.max_model_len is not None:
        args += F.MAX_MODEL_LEN.value(eng.max_model_len)
    args += F.MAX_NUM_BATCHED_TOKENS.value(eng.max_num_batched_tokens)
    args += F.GPU_MEMORY_UTILIZATION.value(decimal(eng.gpu_memory_utilization))
    args += F.MAX_NUM_SEQS.value(eng.max_num_seqs)
    args += F.DATA_PARALLEL_SIZE.value(par.data) + F.TENSOR_PARALLEL_SIZE.value(par.tensor)
    if par.expert:
        args += F.ENABLE_EXPERT_PARALLEL.switch(True)
    if eng.tokenizer_mode is not None:
        args += F.TOKENIZER_MODE.value(eng.tokenizer_mode)
    if eng.tool_call_parser is not None:
        args += F.TOOL_CALL_PARSER.value(eng.tool_call_parser)
    if eng.enable_auto_tool_choice:
        args += F.ENABLE_AUTO_TOOL_CHOICE.switch(True)
    if eng.reasoning_parser is not None:
        args += F.REASONING_PARSER.value(eng.reasoning_parser)
    if eng.hybrid_kv_cache_manager is not None:
        args += F.DISABLE_HYBRID_KV_CACHE_MANAGER.switch(not eng.hybrid_kv_cache_manager)
    if eng.enable_prompt_tokens_details:
        args += F.ENABLE_PROMPT_TOKENS_DETAILS.switch(True)
    if eng.model_loader is not None:
        args += F.MODEL_LOADER_EXTRA_CONFIG.json(eng.model_loader.model_dump(mode="json", exclude_none=True))
    if spec.model.quantization is not None:
        args += F.QUANTIZATION.value(spec.model.quantization)
    args += F.BLOCK_SIZE.value(eng.block_size)
    speculative = speculative_config(spec)
    if speculative is not None:
        args += F.SPECULATIVE_CONFIG.json(speculative)
    if eng.compilation is not None:
        args += F.COMPILATION_CONFIG.json(eng.compilation.model_dump(mode="json", exclude_none=True))
    addl = additional_config(spec)
    if addl:
        args += F.ADDITIONAL_CONFIG.json(addl)
    # vLLM 0.25.1 turns async scheduling on when the flag is absent (contract.flags.ASYNC_SCHEDULING),
    # so both states are rendered.
    args += F.ASYNC_SCHEDULING.switch(eng.async_scheduling)
    return args + list(eng.extra_args)
