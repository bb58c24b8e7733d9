"""The engine part of the spec: every `vllm serve` flag of the seed's production profile as a typed field.

Model-independent knobs default to the production profile of FACTS.md ("Production profile (final)"):
MBT 8192, 32 sequences, memory utilization 0.90, block size 128. Model-specific flags (parsers, tokenizer
mode, max model len) and feature objects (speculative, compilation, loader config) are absent unless the
spec sets them: a default DeepSeek parser would be wrong for any other model, and an object default could
not be switched off (the API server prunes nulls and would re-apply it). examples/dsv4-flash.yaml carries
the seed's values for all of them. Cross-field rules live in `ascend_operator.validation.rules`.
"""

from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field

from ascend_operator.api.base import ApiModel


class CudagraphMode(StrEnum):
    """vLLM `CompilationConfig.cudagraph_mode` values."""

    NONE = "NONE"
    PIECEWISE = "PIECEWISE"
    FULL = "FULL"
    FULL_DECODE_ONLY = "FULL_DECODE_ONLY"
    FULL_AND_PIECEWISE = "FULL_AND_PIECEWISE"


class SpeculativeSpec(ApiModel):
    """Speculative decoding, rendered as `--speculative-config` JSON.

    The seed runs DSpark with 7 draft tokens in eager mode: 689.75 tok/s at C64 (FACTS.md "Speculative
    decoding"). The shell comment that dropped this flag is why the operator checks it after start.
    """

    method: str = Field(min_length=1, max_length=64, description="Speculative method (`method`), e.g. dspark.")
    num_speculative_tokens: int = Field(
        ge=1,
        le=16,
        description="Draft tokens per step (`num_speculative_tokens`). The seed's DSpark7 gives graph width 8.",
    )
    enforce_eager: bool | None = Field(
        default=None, description="Run the draft model eagerly (`enforce_eager`); the seed sets true."
    )


class CompilationSpec(ApiModel):
    """Graph compilation, rendered as `--compilation-config` JSON."""

    cudagraph_mode: CudagraphMode | None = Field(
        default=None,
        description="`cudagraph_mode`; the seed's production profile uses FULL_DECODE_ONLY.",
    )


class ModelLoaderSpec(ApiModel):
    """`--model-loader-extra-config`: the seed loads ~292 GB from 75 shards with 128 threads."""

    enable_multithread_load: bool | None = Field(
        default=None, description="`enable_multithread_load`: parallel shard loading."
    )
    num_threads: int | None = Field(default=None, ge=1, le=1024, description="`num_threads` (the seed: 128).")


class AdditionalConfigSpec(ApiModel):
    """vllm-ascend `--additional-config`: the keys this project knows, typed, plus a passthrough.

    Keys are documented in vllm-ascend's user_guide/configuration/additional_config.md. Typed keys are
    rendered in snake_case; `extra` is merged in as given. Keys removed upstream are refused by
    validation so they can never be silently ignored.
    """

    enable_shared_expert_dp: bool | None = Field(
        default=None, description="`enable_shared_expert_dp`: shared expert in DP (more memory)."
    )
    multistream_overlap_shared_expert: bool | None = Field(
        default=None,
        description="`multistream_overlap_shared_expert`; the seed saw ~820 -> 806 tok/s, so off by default.",
    )
    enable_prefill_mc2: bool | None = Field(
        default=None,
        description="`enable_prefill_mc2`: MC2 needs <= 24 experts per device and EP >= 16 on A2.",
    )
    enable_fused_mc2: bool | None = Field(
        default=None, description="`enable_fused_mc2`: same MC2 preconditions as enable_prefill_mc2."
    )
    enable_reduce_sample: bool | None = Field(
        default=None, description="`enable_reduce_sample`: incompatible with DSpark (capture fails)."
    )
    enable_cpu_binding: bool | None = Field(default=None, description="`enable_cpu_binding` (ARM hosts).")
    extra: dict[str, Any] = Field(
        default_factory=dict,
        max_length=64,
        description="Further additional-config keys, passed through unchanged (snake_case, as vllm-ascend).",
    )


class LongContextSpec(ApiModel):
    """The long-context path (DSA-CP / FlashComm / sequence parallel): off by default.

    FACTS.md "Throughput and latency": DSA-CP makes 256K prefill 2.61x faster but takes ~10% of the KV
    pool (1.078M -> 969K tokens on TP8) and a 512K request stalled at 97.5% KV. The seed's production
    profile leaves it off; a user turning it on accepts that cliff.
    """

    enabled: bool = Field(
        default=False,
        description="Turn on DSA-CP + FlashComm1 (additional-config `enable_dsa_cp`, `enable_flashcomm1`: "
        "vllm-ascend refuses DSA-CP without FlashComm1). Requires numSpeculativeTokens+1 to be a multiple of "
        "parallelism.tensor.",
    )


class EngineSpec(ApiModel):
    """Engine (vLLM) settings. Defaults are the seed's production profile."""

    port: int = Field(default=8000, ge=1, le=65535, description="Port of the OpenAI-compatible server.")
    max_model_len: int | None = Field(
        default=None,
        ge=1,
        description="An admission limit (~300K context + output room in the seed), not a "
        "promise such a request completes. Unset: vLLM takes the model's own limit and the HBM budget check "
        "is skipped.",
    )
    max_num_batched_tokens: int = Field(
        default=8192,
        ge=1,
        description="MBT: the chunked-prefill budget per step. 8192 is the "
        "seed's HBM sweet spot; 32768 does not start at long context.",
    )
    max_num_seqs: int = Field(
        default=32,
        ge=1,
        le=4096,
        description="Running slots; a capacity and tail-latency knob.",
    )
    long_prefill_token_threshold: int | None = Field(
        default=None,
        ge=0,
        description="The most prompt tokens one request computes in a step, "
        "running or waiting (vllm/v1/core/sched/scheduler.py:478-479, 827-829), so a long prompt's chunks "
        "leave the rest of maxNumBatchedTokens to short prompts instead of taking all of it: without it a "
        "short prompt arriving during a 300K prefill waits for the whole prefill. It caps a speculative "
        "decode too (a threshold under numSpeculativeTokens + 1 verifies fewer drafts). Unset or 0: no cap.",
    )
    max_num_partial_prefills: int | None = Field(
        default=None,
        ge=1,
        description="Concurrent partial prefills (vllm/config/scheduler.py:70-72): only 1 (unset) starts; "
        "vLLM 0.25.1's V1 engine refuses concurrent partial prefills (vllm/engine/arg_utils.py:2369-2379).",
    )
    max_long_partial_prefills: int | None = Field(
        default=None,
        ge=1,
        description="Concurrent partial prefills of long prompts (vllm/config/scheduler.py:74-78): only 1 "
        "(unset) starts, as for maxNumPartialPrefills; vLLM also requires it to be at most maxNumPartialPrefills "
        "(vllm/config/scheduler.py:315-319).",
    )
    gpu_memory_utilization: float = Field(
        default=0.90,
        gt=0,
        le=1,
        description="Share of each NPU's HBM vLLM may use, in (0, 1]; 0.90 keeps the seed's safety margin.",
    )
    block_size: int = Field(
        default=128,
        ge=1,
        le=4096,
        description="KV block tokens. vllm-ascend rewrites any value it does not keep (32, 64 "
        "or 128 on DeepSeek-V4, 128 elsewhere), so validation refuses those for a known model profile.",
    )
    tokenizer_mode: str | None = Field(
        default=None, description="Tokenizer mode (vLLM's `auto`, `slow`, or a model's own such as `deepseek_v4`)."
    )
    tool_call_parser: str | None = Field(
        default=None, description="Parser that turns the model's tool calls into OpenAI tool_calls."
    )
    enable_auto_tool_choice: bool = Field(
        default=False,
        description="Let the model decide when to call tools (`tool_choice: auto`); needs toolCallParser.",
    )
    reasoning_parser: str | None = Field(
        default=None, description="Parser that splits the model's reasoning from its answer (reasoning_content)."
    )
    hybrid_kv_cache_manager: bool | None = Field(
        default=None,
        description="The hybrid KV cache manager (the seed's hybrid KV groups) on or off; unset leaves vLLM's default.",
    )
    enable_prompt_tokens_details: bool = Field(
        default=True,
        description="Cached prompt tokens in usage, so a benchmark can check "
        "the prefix-cache hit delta (FACTS.md benchmark pitfall 1).",
    )
    async_scheduling: bool = Field(
        default=False,
        description="Asynchronous scheduling on or off (vLLM 0.25.1 turns it on "
        "when neither is given); the seed measured 689.75 -> 687.31 tok/s, so off.",
    )
    shutdown_timeout_seconds: int = Field(
        default=45,
        ge=0,
        le=3600,
        description="After a SIGTERM the operator did not drain first (`kubectl delete "
        "pod`, an eviction, a node shutdown), vLLM finishes in-flight requests for up to this many seconds "
        "(mode drain, vllm/entrypoints/launcher.py:109-123) instead of aborting them (0, vLLM's default). The "
        "pod's terminationGracePeriodSeconds is this plus 15 s, so the kubelet's SIGKILL never cuts it short.",
    )
    model_loader: ModelLoaderSpec | None = Field(
        default=None, description="Model loader options (threads, safetensors loading); unset omits the flag."
    )
    speculative: SpeculativeSpec | None = Field(
        default=None, description="Speculative decoding; unset runs without it."
    )
    compilation: CompilationSpec | None = Field(default=None, description="Graph compilation; unset omits the flag.")
    additional_config: AdditionalConfigSpec = Field(
        default_factory=AdditionalConfigSpec,
        description="vllm-ascend's additional config: the keys this project knows, typed, plus a passthrough.",
    )
    long_context: LongContextSpec = Field(
        default_factory=LongContextSpec, description="The long-context path; off by default."
    )
    engine_version: str | None = Field(
        default=None,
        max_length=64,
        pattern=r"^[0-9][0-9A-Za-z.+-]*$",
        description="vLLM version of the engine image when it is not the one the operator's engine contract "
        "describes (0.25.1). Unset or 0.25.1: an extraArgs flag vLLM 0.25.1 does not accept is refused. Another "
        "version: such flags pass unchecked (flags of a newer engine); typed-flag repeats are still refused.",
    )
    extra_args: list[Annotated[str, Field(max_length=1024)]] = Field(
        default_factory=list,
        max_length=32,  # bounded so the CEL rule over it stays within the API server's cost budget
        description="Further `vllm serve` arguments passed through as list items (never through a shell). "
        "A flag that a typed field renders may not be repeated here in any spelling (-sc, --no-x, --x_y, "
        "--x.key); a flag vLLM 0.25.1 does not know is refused unless engineVersion names another version.",
    )
