"""The `vllm serve` flags the renderer emits, with their argparse form and every spelling vLLM accepts.

Why: a flag's spellings decide what `spec.engine.extraArgs` may not repeat (`-sc` is `--speculative-config`,
`--no-x` is `--x`, `--speculative-config.method` and `--speculative_config` are the same option after vLLM's
FlexibleArgumentParser rewrites them), how a switch is turned off (`--no-async-scheduling`), and how the
simulator and the tests parse a rendered command line. Adding a typed flag is one entry in `TYPED` naming
the spec `field` it carries, plus that field in the api model: render/args.py derives the argument from the entry.
Paths below are in the vllm 0.25.1 sdist; each flag is checked against it by tests/contract/.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ascend_operator.contract import additional_config, serve_flags


class Form(StrEnum):
    """How argparse reads a flag (vllm/engine/arg_utils.py get_kwargs, lines 330-350)."""

    VALUE = "value"
    """`--x VALUE` or `--x=VALUE`."""
    JSON = "json"
    """A JSON object (`--x '{"k":1}'`) or dotted keys (`--x.k 1`, argparse_utils.py:388-417)."""
    BOOL = "bool"
    """argparse.BooleanOptionalAction: `--x` and `--no-x` (arg_utils.py:345-347)."""
    STORE_TRUE = "store_true"
    """A bare switch without a `--no-` twin."""
    OPTIONAL = "optional"
    """`bool | str` fields: bare flag means True, or one value (arg_utils.py:340-344)."""


@dataclass(frozen=True, kw_only=True)
class Flag:
    """One `vllm serve` option as upstream declares it."""

    name: str
    """The long spelling, `--max-model-len`."""
    form: Form
    source: str
    """file:line of the long option string (or the frontend dataclass field) in the vllm 0.25.1 sdist."""
    aliases: tuple[str, ...] = ()
    """Short spellings declared in the same add_argument call, e.g. `-sc`."""
    value_type: type = str
    """What a VALUE flag's argument converts to (the field's annotation upstream)."""
    shorthands: tuple[str, ...] = ()
    """Other options that write keys of this JSON flag's object (`--spec-tokens` sets
    speculative_config.num_speculative_tokens): repeating them is repeating this flag."""
    field: str | None = None
    """The spec field this flag carries, as the api models' attribute path (`engine.port`). render/args.py
    renders every TYPED flag that has a field (or a `fixed` value) from the attributes below alone, in TYPED
    order; None for the flags a multi-node group sets per node (render/group.py)."""
    fixed: str | None = None
    """A value the operator always gives, not a spec field (the listen address)."""
    positional: bool = False
    """Rendered as the argument right after `serve` (vLLM's positional model tag) instead of the option."""
    says_false: bool = False
    """BOOL: a false field renders `--no-x`; otherwise false leaves the flag out (the flag is off by default)."""
    negated: bool = False
    """BOOL: the field is the flag's opposite (`hybridKvCacheManager: true` renders
    `--no-disable-hybrid-kv-cache-manager`)."""
    merged: str | None = None
    """JSON: a key of the field's object whose mapping is merged into the object as given (passthrough)."""
    switched: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """JSON: (path of a bool field, keys): when that field is true, these keys are set true in the object
    (the long-context switch turns on two additional-config keys)."""

    @property
    def negation(self) -> str | None:
        """`--no-x` for a BooleanOptional flag."""
        return "--no-" + self.name[2:] if self.form is Form.BOOL else None

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every option string that sets this flag's destination."""
        neg = self.negation
        return (self.name, *self.aliases, *((neg,) if neg else ()), *self.shorthands)

    @property
    def takes_value(self) -> bool:
        return self.form in (Form.VALUE, Form.JSON)

    def value(self, value: object) -> list[str]:
        """`[--x, value]`."""
        assert self.form is Form.VALUE, self.name
        return [self.name, str(value)]

    def switch(self, on: bool) -> list[str]:
        """`--x` or `--no-x`."""
        assert self.form is Form.BOOL, self.name
        return [self.name if on else "--no-" + self.name[2:]]

    def json(self, obj: dict[str, Any]) -> list[str]:
        """`[--x, compact JSON]`, as the seed writes it."""
        assert self.form is Form.JSON, self.name
        return [self.name, json.dumps(obj, separators=(",", ":"))]


def _f(name: str, form: Form, source: str, *aliases: str, value_type: type = str, **rendering: Any) -> Flag:
    return Flag(name=name, form=form, source=source, aliases=aliases, value_type=value_type, **rendering)


#: `--host`: the engine listens on every interface of its pod (the Service and the probes reach it there).
LISTEN_HOST = "0.0.0.0"
_LONG_CONTEXT = (("engine.long_context.enabled", tuple(key.name for key in additional_config.LONG_CONTEXT)),)


_ARGS = "vllm/engine/arg_utils.py"
_CLI = "vllm/entrypoints/openai/cli_args.py"

# fmt: off
MODEL = _f("--model", Form.VALUE, f"{_ARGS}:800", field="model.path", positional=True)
HOST = _f("--host", Form.VALUE, f"{_CLI}:227", fixed=LISTEN_HOST)
PORT = _f("--port", Form.VALUE, f"{_CLI}:229", value_type=int, field="engine.port")
SERVED_MODEL_NAME = _f("--served-model-name", Form.VALUE, f"{_ARGS}:852", field="model.served_name")
MAX_MODEL_LEN = _f("--max-model-len", Form.VALUE, f"{_ARGS}:822", value_type=int, field="engine.max_model_len")
MAX_NUM_BATCHED_TOKENS = _f(
    "--max-num-batched-tokens", Form.VALUE, f"{_ARGS}:1409", value_type=int, field="engine.max_num_batched_tokens"
)
GPU_MEMORY_UTILIZATION = _f(
    "--gpu-memory-utilization", Form.VALUE, f"{_ARGS}:1156", value_type=float, field="engine.gpu_memory_utilization"
)
MAX_NUM_SEQS = _f("--max-num-seqs", Form.VALUE, f"{_ARGS}:1416", value_type=int, field="engine.max_num_seqs")
# The scheduler's prefill knobs (vllm/config/scheduler.py:70-80). The threshold caps the tokens one request
# computes per step, running (v1/core/sched/scheduler.py:478-479) and waiting (:827-829); the partial-prefill
# pair is refused by the V1 engine unless 1 (arg_utils.py:2369-2379): validation/prefill_rules.py.
MAX_NUM_PARTIAL_PREFILLS = _f(
    "--max-num-partial-prefills", Form.VALUE, f"{_ARGS}:1423", value_type=int, field="engine.max_num_partial_prefills"
)
MAX_LONG_PARTIAL_PREFILLS = _f(
    "--max-long-partial-prefills", Form.VALUE, f"{_ARGS}:1426", value_type=int,
    field="engine.max_long_partial_prefills",
)
LONG_PREFILL_TOKEN_THRESHOLD = _f(
    "--long-prefill-token-threshold", Form.VALUE, f"{_ARGS}:1430", value_type=int,
    field="engine.long_prefill_token_threshold",
)
DATA_PARALLEL_SIZE = _f(
    "--data-parallel-size", Form.VALUE, f"{_ARGS}:1032", "-dp", value_type=int, field="parallelism.data"
)
TENSOR_PARALLEL_SIZE = _f(
    "--tensor-parallel-size", Form.VALUE, f"{_ARGS}:1007", "-tp", value_type=int, field="parallelism.tensor"
)
ENABLE_EXPERT_PARALLEL = _f("--enable-expert-parallel", Form.BOOL, f"{_ARGS}:1094", "-ep", field="parallelism.expert")
TOKENIZER_MODE = _f("--tokenizer-mode", Form.VALUE, f"{_ARGS}:804", field="engine.tokenizer_mode")
TOOL_CALL_PARSER = _f("--tool-call-parser", Form.VALUE, f"{_CLI}:111", field="engine.tool_call_parser")
ENABLE_AUTO_TOOL_CHOICE = _f(
    "--enable-auto-tool-choice", Form.BOOL, f"{_CLI}:105", field="engine.enable_auto_tool_choice"
)
REASONING_PARSER = _f("--reasoning-parser", Form.VALUE, f"{_ARGS}:949", field="engine.reasoning_parser")
DISABLE_HYBRID_KV_CACHE_MANAGER = _f(
    "--disable-hybrid-kv-cache-manager", Form.BOOL, f"{_ARGS}:1461",
    field="engine.hybrid_kv_cache_manager", negated=True, says_false=True,
)
ENABLE_PROMPT_TOKENS_DETAILS = _f(
    "--enable-prompt-tokens-details", Form.BOOL, f"{_CLI}:132", field="engine.enable_prompt_tokens_details"
)
MODEL_LOADER_EXTRA_CONFIG = _f("--model-loader-extra-config", Form.JSON, f"{_ARGS}:908", field="engine.model_loader")
QUANTIZATION = _f("--quantization", Form.VALUE, f"{_ARGS}:823", "-q", field="model.quantization")
BLOCK_SIZE = _f("--block-size", Form.VALUE, f"{_ARGS}:1154", value_type=int, field="engine.block_size")
# --spec-method/--spec-model/--spec-tokens write keys of the same object (arg_utils.py:1517-1521, 1724-1737).
SPECULATIVE_CONFIG = Flag(
    name="--speculative-config", form=Form.JSON, source=f"{_ARGS}:1514", aliases=("-sc",),
    shorthands=("--spec-method", "--spec-model", "--spec-tokens"), field="engine.speculative",
)
COMPILATION_CONFIG = _f("--compilation-config", Form.JSON, f"{_ARGS}:1534", "-cc", field="engine.compilation")
ADDITIONAL_CONFIG = _f(
    "--additional-config", Form.JSON, f"{_ARGS}:1542",
    field="engine.additional_config", merged="extra", switched=_LONG_CONTEXT,
)
# SchedulerConfig.async_scheduling is `bool | None = None` (vllm/config/scheduler.py:158) and None resolves
# to True when the executor supports it (vllm/config/vllm.py:992-1040): off has to be said, `--no-...`.
ASYNC_SCHEDULING = _f(
    "--async-scheduling", Form.BOOL, f"{_ARGS}:1465", field="engine.async_scheduling", says_false=True
)
# A disaggregated service's roles (api/disaggregation.py): vllm-ascend's Mooncake connector and its side.
KV_TRANSFER_CONFIG = _f("--kv-transfer-config", Form.JSON, f"{_ARGS}:1527", field="pd_role.kv_transfer")
# 0 (the default) is mode "abort": a SIGTERM kills the engine core with requests in flight; N is mode "drain"
# (vllm/entrypoints/launcher.py:109-123). render/pod.py sets the pod's grace period above it.
SHUTDOWN_TIMEOUT = _f(
    "--shutdown-timeout", Form.VALUE, f"{_ARGS}:1579", value_type=int, field="engine.shutdown_timeout_seconds"
)
# Multi-node groups (render/group.py; vllm-ascend docs DeepSeek-R1.md multi-node DP): every node's engine
# is told its local DP size and the head's address and RPC port; workers also their start rank and --headless.
DATA_PARALLEL_START_RANK = _f("--data-parallel-start-rank", Form.VALUE, f"{_ARGS}:1044", "-dpr", value_type=int)
DATA_PARALLEL_SIZE_LOCAL = _f("--data-parallel-size-local", Form.VALUE, f"{_ARGS}:1050", "-dpl", value_type=int)
DATA_PARALLEL_ADDRESS = _f("--data-parallel-address", Form.VALUE, f"{_ARGS}:1056", "-dpa")
DATA_PARALLEL_RPC_PORT = _f("--data-parallel-rpc-port", Form.VALUE, f"{_ARGS}:1062", "-dpp", value_type=int)
HEADLESS = _f("--headless", Form.STORE_TRUE, f"{_CLI}:353")
# fmt: on

#: Every flag a typed field of the spec renders. `spec.engine.extraArgs` may repeat none of their spellings.
TYPED: tuple[Flag, ...] = (
    MODEL, HOST, PORT, SERVED_MODEL_NAME, MAX_MODEL_LEN, MAX_NUM_BATCHED_TOKENS, GPU_MEMORY_UTILIZATION,
    MAX_NUM_SEQS, MAX_NUM_PARTIAL_PREFILLS, MAX_LONG_PARTIAL_PREFILLS, LONG_PREFILL_TOKEN_THRESHOLD,
    DATA_PARALLEL_SIZE, TENSOR_PARALLEL_SIZE, ENABLE_EXPERT_PARALLEL, TOKENIZER_MODE,
    TOOL_CALL_PARSER, ENABLE_AUTO_TOOL_CHOICE, REASONING_PARSER, DISABLE_HYBRID_KV_CACHE_MANAGER,
    ENABLE_PROMPT_TOKENS_DETAILS, MODEL_LOADER_EXTRA_CONFIG, QUANTIZATION, BLOCK_SIZE, SPECULATIVE_CONFIG,
    COMPILATION_CONFIG, ADDITIONAL_CONFIG, KV_TRANSFER_CONFIG, ASYNC_SCHEDULING, SHUTDOWN_TIMEOUT,
    DATA_PARALLEL_START_RANK,
    DATA_PARALLEL_SIZE_LOCAL, DATA_PARALLEL_ADDRESS, DATA_PARALLEL_RPC_PORT, HEADLESS,
)  # fmt: skip

#: Every `vllm serve` option of vLLM 0.25.1 (typed ones first), by its long name.
ALL: dict[str, Flag] = {f.name: f for f in TYPED}
for _name, _form in serve_flags.PASSTHROUGH.items():
    ALL.setdefault(_name, Flag(name=_name, form=Form(_form), source=serve_flags.SOURCE))
for _short in (s for f in TYPED for s in f.shorthands):
    ALL.pop(_short, None)  # spelled through their JSON flag
for _alias, _long in serve_flags.SHORT_ALIASES.items():
    _flag = ALL[_long]
    if _alias not in _flag.aliases:
        ALL[_long] = Flag(name=_flag.name, form=_flag.form, source=_flag.source, aliases=(*_flag.aliases, _alias))

#: spelling -> flag, for every spelling of every option.
BY_SPELLING: dict[str, Flag] = {s: f for f in ALL.values() for s in f.spellings}
TYPED_SPELLINGS: frozenset[str] = frozenset(s for f in TYPED for s in f.spellings)


def option_name(arg: str) -> str | None:
    """The option an argument item names, as vLLM's FlexibleArgumentParser reads it; None for a value.

    `--max_model_len=1` -> `--max-model-len` (underscores up to the first dot become dashes,
    vllm/utils/argparse_utils.py:301-323), `--speculative-config.method` -> `--speculative-config`
    (dotted JSON keys, argparse_utils.py:388-417), `-O3` -> `--optimization-level` (argparse_utils.py:324-333).
    """
    if not arg.startswith("-") or arg == "-" or _is_number(arg):
        return None
    name = arg.split("=", 1)[0]
    if name.startswith("--"):
        head, dot, rest = name[2:].partition(".")
        name = _unabbreviated("--" + head.replace("_", "-"))
        flag = BY_SPELLING.get(name)
        if dot and flag is not None and flag.form is not Form.JSON:
            return name + "." + rest  # `--port.x` is no dotted JSON key; argparse sees an unknown option
        return name
    if name.startswith("-O"):
        return "--optimization-level"
    head, dot, _rest = name.partition(".")
    return head if dot and head in BY_SPELLING and BY_SPELLING[head].form is Form.JSON else name


def _unabbreviated(name: str) -> str:
    """vLLM's parsers keep argparse's allow_abbrev (vllm/entrypoints/cli/serve.py:156 passes no
    allow_abbrev): a prefix of exactly one long option is that option; of several, argparse errors."""
    if name in BY_SPELLING:
        return name
    matches = [s for s in BY_SPELLING if s.startswith(name) and s.startswith("--")]
    return matches[0] if len(matches) == 1 else name


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def typed_repeats(args: list[str]) -> list[str]:
    """Items of `args` that set a flag a typed field renders (any spelling)."""
    return [a for a in args if option_name(a) in TYPED_SPELLINGS]


def unknown_options(args: list[str]) -> list[str]:
    """Option names in `args` that vLLM 0.25.1's `vllm serve` does not declare (argparse exits 2 on them)."""
    return [n for n in (option_name(a) for a in args) if n is not None and n not in BY_SPELLING]
