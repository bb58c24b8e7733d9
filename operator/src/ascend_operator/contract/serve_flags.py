"""Every other option of vLLM 0.25.1's `vllm serve`, by argparse form: the known-flag set, as data.

Why: vLLM's argparse exits 2 on an option it does not declare (`vllm serve: error: unrecognized arguments:
--no-such-flag`), so an extraArgs typo crash-loops a pod on hardware. The operator refuses such a flag
before a pod exists, and the simulator refuses it the way vLLM does; both read this list. It was read
from the sdist (make_arg_parser in vllm/entrypoints/openai/cli_args.py:339-383, FrontendArgs fields there,
EngineArgs.add_cli_args in vllm/engine/arg_utils.py:790-1560, AsyncEngineArgs.add_cli_args at 2689) and
tests/contract/test_flags.py checks it is exactly upstream's set. Typed flags are in `flags.TYPED`;
BooleanOptional `--no-x` twins are derived. Names without the leading `--`.
"""

SOURCE = "vllm/engine/arg_utils.py:790-1560, vllm/entrypoints/openai/cli_args.py:67-383"

VALUE: tuple[str, ...] = (
    "all2all-backend", "allowed-headers", "allowed-local-media-path", "allowed-media-domains", "allowed-methods",
    "allowed-origins", "api-key", "api-server-count", "attention-backend", "chat-template",
    "chat-template-content-format", "code-revision", "collect-detailed-traces", "config", "config-format", "convert",
    "cp-kv-cache-interleave-size", "cpu-distributed-timeout-seconds", "cpu-offload-gb", "cpu-offload-params",
    "cudagraph-capture-sizes", "data-parallel-address", "data-parallel-backend", "data-parallel-rank",
    "data-parallel-rpc-port", "data-parallel-size-local", "data-parallel-start-rank", "data-parallel-supervisor-port",
    "dbo-decode-token-threshold", "dbo-prefill-token-threshold", "dcp-comm-backend", "dcp-kv-cache-interleave-size",
    "decode-context-parallel-size", "device-ids", "disable-access-log-for-endpoints", "distributed-executor-backend",
    "distributed-timeout-seconds", "download-dir", "dp-supervisor-probe-failure-threshold",
    "dp-supervisor-probe-interval-s", "dp-supervisor-probe-timeout-s", "dtype", "expert-placement-strategy",
    "fingerprint-mode", "fingerprint-value", "gdn-prefill-backend", "generation-config", "h11-max-header-count",
    "h11-max-incomplete-event-size", "hf-config-path", "ignore-patterns", "io-processor-plugin", "jit-monitor-mode",
    "kv-cache-dtype", "kv-cache-dtype-skip-layers", "kv-cache-memory-bytes", "kv-cache-metrics-sample",
    "kv-offloading-backend", "kv-offloading-size", "linear-backend", "load-format", "log-config-file",
    "logits-processors", "logprobs-mode", "long-prefill-token-threshold", "lora-dtype", "lora-modules",
    "lora-target-modules", "mamba-backend", "mamba-block-size", "mamba-cache-dtype", "mamba-cache-mode",
    "mamba-cache-philox-rounds", "mamba-ssm-cache-dtype", "master-addr", "master-port", "max-cpu-loras",
    "max-cudagraph-capture-size", "max-log-len", "max-logprobs", "max-long-partial-prefills", "max-lora-rank",
    "max-loras", "max-num-partial-prefills", "max-parallel-loading-workers", "middleware", "mm-encoder-attn-backend",
    "mm-encoder-attn-dtype", "mm-encoder-fp8-scale-path", "mm-encoder-fp8-scale-save-margin",
    "mm-encoder-fp8-scale-save-path", "mm-encoder-tp-mode", "mm-ipc-gpu-memory-gb", "mm-processor-cache-gb",
    "mm-processor-cache-type", "mm-shm-cache-max-object-size-mb", "mm-tensor-ipc", "model-impl", "moe-backend",
    "nnodes", "node-rank", "num-gpu-blocks-override", "numa-bind-cpus", "numa-bind-nodes", "offload-backend",
    "offload-group-size", "offload-num-in-group", "offload-params", "offload-prefetch-step", "optimization-level",
    "otlp-traces-endpoint", "override-attention-dtype", "performance-mode", "pipeline-parallel-size",
    "prefill-context-parallel-size", "prefill-schedule-interval", "prefix-caching-hash-algo", "reasoning-parser-plugin",
    "renderer-num-workers", "response-role", "revision", "root-path", "runner", "safetensors-load-strategy",
    "safetensors-prefetch-block-size", "safetensors-prefetch-num-threads", "scheduler-cls", "scheduling-policy", "seed",
    "show-hidden-metrics-for-version", "shutdown-timeout", "spec-method", "spec-model", "spec-tokens", "ssl-ca-certs",
    "ssl-cert-reqs", "ssl-certfile", "ssl-ciphers", "ssl-keyfile", "stream-interval", "tokenizer", "tokenizer-revision",
    "tool-parser-plugin", "tool-server", "ubatch-size", "uds", "uvicorn-log-level", "video-pruning-rate", "watermark",
    "worker-cls", "worker-extension-cls",

)  # fmt: skip
JSON: tuple[str, ...] = (
    "attention-config", "default-chat-template-kwargs", "default-mm-loras", "diffusion-config", "ec-transfer-config",
    "eplb-config", "hf-overrides", "ir-op-priority", "kernel-config", "kv-events-config", "kv-transfer-config",
    "limit-mm-per-prompt", "media-io-kwargs", "mm-processor-kwargs", "model-class-overrides",
    "override-generation-config", "pooler-config", "profiler-config", "pt-load-map-location", "quantization-config",
    "reasoning-config", "structured-outputs-config", "weight-transfer-config",

)  # fmt: skip
BOOL: tuple[str, ...] = (
    "allow-credentials", "allow-deprecated-quantization", "calculate-kv-scales", "cudagraph-metrics",
    "data-parallel-external-lb", "data-parallel-hybrid-lb", "disable-cascade-attn", "disable-chunked-mm-input",
    "disable-custom-all-reduce", "disable-fastapi-docs", "disable-nccl-for-dp-synchronization",
    "disable-sliding-window", "disable-uvicorn-access-log", "enable-chunked-prefill", "enable-cumem-allocator",
    "enable-dbo", "enable-elastic-ep", "enable-ep-weight-filter", "enable-eplb", "enable-flash-late-interaction",
    "enable-flashinfer-autotune", "enable-force-include-usage", "enable-layerwise-nvtx-tracing", "enable-log-deltas",
    "enable-log-outputs", "enable-log-requests", "enable-logging-iteration-details", "enable-lora",
    "enable-mamba-cache-stochastic-rounding", "enable-mfu-metrics", "enable-mixed-moe-lora-format", "enable-mm-embeds",
    "enable-offline-docs", "enable-per-request-metrics", "enable-prefix-caching", "enable-prompt-embeds",
    "enable-request-id-headers", "enable-return-routed-experts", "enable-server-load-tracking", "enable-sleep-mode",
    "enable-ssl-refresh", "enable-tokenizer-info-endpoint", "enable-tower-connector-lora", "enforce-eager",
    "exclude-tools-when-tool-choice-none", "fail-on-environ-validation", "fully-sharded-loras", "interleave-mm-strings",
    "jit-monitor-verbose", "kv-cache-metrics", "kv-sharing-fast-prefill", "language-model-only", "log-error-stack",
    "mm-encoder-only", "numa-bind", "ray-workers-use-nsight", "return-tokens-as-token-ids",
    "scheduler-reserve-full-isl", "skip-mm-profiling", "skip-tokenizer-init", "specialize-active-lora", "tokens-only",
    "trust-remote-code", "trust-request-chat-template", "use-fp64-gumbel", "use-tqdm-on-load",

)  # fmt: skip
STORE_TRUE: tuple[str, ...] = (
    "aggregate-engine-logging", "data-parallel-multi-port-external-lb", "disable-log-stats", "grpc", "headless",

)  # fmt: skip
OPTIONAL: tuple[str, ...] = (
    "hf-token",

)  # fmt: skip

#: long name -> form ("value", "json", "bool", "store_true", "optional"), for the flags above.
PASSTHROUGH: dict[str, str] = {
    "--" + name: form
    for form, names in (
        ("value", VALUE), ("json", JSON), ("bool", BOOL), ("store_true", STORE_TRUE), ("optional", OPTIONAL)
    )
    for name in names
}  # fmt: skip

#: Short spellings of options, declared in the same add_argument call (arg_utils.py:968-1536, cli_args.py:359).
SHORT_ALIASES: dict[str, str] = {
    "-ac": "--attention-config", "-asc": "--api-server-count", "-cc": "--compilation-config",
    "-dc": "--diffusion-config", "-dcp": "--decode-context-parallel-size", "-dp": "--data-parallel-size",
    "-dpa": "--data-parallel-address", "-dpb": "--data-parallel-backend", "-dpe": "--data-parallel-external-lb",
    "-dph": "--data-parallel-hybrid-lb", "-dpl": "--data-parallel-size-local",
    "-dpm": "--data-parallel-multi-port-external-lb", "-dpn": "--data-parallel-rank",
    "-dpp": "--data-parallel-rpc-port", "-dpr": "--data-parallel-start-rank", "-ep": "--enable-expert-parallel",
    "-n": "--nnodes", "-pcp": "--prefill-context-parallel-size", "-pp": "--pipeline-parallel-size",
    "-q": "--quantization", "-r": "--node-rank", "-sc": "--speculative-config", "-tp": "--tensor-parallel-size",
}  # fmt: skip
