"""Property: any valid spec renders args that parse back (with vLLM's flag grammar) to the same settings."""

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ascend_operator.api.parse import parse_spec
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.render.args import additional_config, build_engine_args
from ascend_operator.validation import Severity, validate_spec
from tests.unit.vllm_cli import parse_serve

names = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)
layouts = st.sampled_from([(8, 1, 8), (4, 2, 8), (2, 4, 8), (1, 1, 1), (2, 1, 2), (4, 1, 4)])


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    tensor, data, npus = draw(layouts)
    engine: dict[str, Any] = {
        "port": draw(st.integers(1024, 65535)),
        "maxNumSeqs": draw(st.integers(1, 256)),
        "maxNumBatchedTokens": draw(st.integers(256, 65536)),
        "gpuMemoryUtilization": draw(st.floats(0.05, 1.0, allow_nan=False)),
        "blockSize": draw(st.sampled_from([16, 64, 128, 256])),
        "enableAutoToolChoice": draw(st.booleans()),
        "enablePromptTokensDetails": draw(st.booleans()),
        "asyncScheduling": draw(st.booleans()),
    }
    optional = {
        "maxModelLen": st.integers(1024, 1_048_576),
        "tokenizerMode": names,
        "toolCallParser": names,
        "reasoningParser": names,
        "hybridKvCacheManager": st.booleans(),
        "modelLoader": st.fixed_dictionaries(
            {"enableMultithreadLoad": st.booleans(), "numThreads": st.integers(1, 256)}
        ),
        "speculative": st.fixed_dictionaries(
            {
                "method": st.sampled_from(["dspark", "mtp", "eagle3"]),
                "numSpeculativeTokens": st.integers(1, 8),
            },
            optional={"enforceEager": st.booleans()},
        ),
        "compilation": st.fixed_dictionaries(
            {"cudagraphMode": st.sampled_from(["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY"])}
        ),
        "additionalConfig": st.fixed_dictionaries(
            {},
            optional={
                "enableSharedExpertDp": st.booleans(),
                "multistreamOverlapSharedExpert": st.booleans(),
                "extra": st.dictionaries(names.map(lambda n: "x_" + n), st.integers(0, 9), max_size=2),
            },
        ),
        "longContext": st.fixed_dictionaries({"enabled": st.booleans()}),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            engine[key] = draw(strategy)
    return {
        "image": "img",
        "npus": npus,
        "parallelism": {"tensor": tensor, "data": data, "expert": draw(st.booleans())},
        "model": {
            "path": "/models/" + draw(names),
            "servedName": draw(names),
            "quantization": draw(st.none() | st.just("ascend")),
            "source": {"hostPath": {"path": "/data/m"}},
        },
        "engine": engine,
    }


def _expected(spec: AscendInferenceServiceSpec) -> dict[str, Any]:
    eng, par = spec.engine, spec.parallelism
    dump = lambda model: None if model is None else model.model_dump(mode="json", exclude_none=True)  # noqa: E731
    return {
        "model": spec.model.path,
        "host": "0.0.0.0",
        "port": eng.port,
        "served_model_name": spec.model.served_name,
        "max_model_len": eng.max_model_len,
        "max_num_batched_tokens": eng.max_num_batched_tokens,
        "gpu_memory_utilization": eng.gpu_memory_utilization,
        "max_num_seqs": eng.max_num_seqs,
        "data_parallel_size": par.data,
        "tensor_parallel_size": par.tensor,
        "enable_expert_parallel": par.expert or None,
        "tokenizer_mode": eng.tokenizer_mode,
        "tool_call_parser": eng.tool_call_parser,
        "enable_auto_tool_choice": eng.enable_auto_tool_choice or None,
        "reasoning_parser": eng.reasoning_parser,
        "disable_hybrid_kv_cache_manager": None
        if eng.hybrid_kv_cache_manager is None
        else not eng.hybrid_kv_cache_manager,
        "enable_prompt_tokens_details": eng.enable_prompt_tokens_details or None,
        "model_loader_extra_config": dump(eng.model_loader),
        "quantization": spec.model.quantization,
        "block_size": eng.block_size,
        "speculative_config": dump(eng.speculative),
        "compilation_config": dump(eng.compilation),
        "additional_config": additional_config(spec) or None,
        "async_scheduling": eng.async_scheduling,
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_rendered_args_parse_back_to_the_spec(body: dict[str, Any]) -> None:
    spec = parse_spec(body)
    assume(not [f for f in validate_spec(spec) if f.severity is Severity.ERROR])
    parsed, unknown = parse_serve(build_engine_args(spec))
    assert unknown == []
    expected = _expected(spec)
    assert {k: v for k, v in vars(parsed).items() if k in expected} == expected
    # No other vLLM option is set by the renderer.
    assert {k: v for k, v in vars(parsed).items() if k not in expected and v is not None} == {}
