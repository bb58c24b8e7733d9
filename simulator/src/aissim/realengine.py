"""The real engine in place of the simulator: a pod's rendered `vllm serve` args, run by vLLM 0.25.1 on CPU.

Why: the operator's health claims (canary, effective-config check, stall, drift, drain) are only as good as
the engine they were proven against. `aissim attach --engine vllm`, the real-engine tests and the fidelity
tier start the seed's own engine version (hack/real-vllm.sh installs it) on a tiny model (aissim/tinymodel.py)
with the pod's args, translated by the one table below: every flag or value that only an Ascend NPU (or the
real 292 GB of weights) can honour is dropped or mapped, with the reason. Everything else the pod asks for
reaches vLLM unchanged, so a flag the renderer gets wrong fails here as it would on the node.

Environment: only what the table names, plus the pod's Secret-sourced variables (the API key). The pod's
literal env (LD_PRELOAD of the image's jemalloc, HCCL_*, PYTORCH_NPU_ALLOC_CONF) is Ascend's and is not
passed. VLLM_HOST_IP=127.0.0.1: vLLM otherwise opens its internal message queues on the machine's interface
address, and these engines must touch loopback only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aissim import tinymodel


@dataclass(frozen=True)
class FlagRewrite:
    """What becomes of one `vllm serve` flag: dropped (with its value, if it takes one) or given `value`."""

    flag: str
    takes_value: bool
    value: str | None
    reason: str


DROP = None
#: The translation table (docs/real-engine.md renders it). A flag not listed passes unchanged.
RULES: tuple[FlagRewrite, ...] = (
    FlagRewrite("--quantization", True, DROP, "`ascend` is vllm-ascend's W8A8 method; the dummy weights are bf16"),
    FlagRewrite("--tensor-parallel-size", True, "1", "one CPU worker per pod (2 cores); TP is an NPU-count decision"),
    FlagRewrite("--data-parallel-size", True, "1", "one engine core per pod; DP ranks are NPU groups"),
    FlagRewrite("--enable-expert-parallel", False, DROP, "the tiny Llama has no experts"),
    FlagRewrite(
        "--speculative-config", True, DROP, "`dspark` is vllm-ascend's drafter; the tiny model has no draft head"
    ),
    FlagRewrite("--compilation-config", True, DROP, "graph modes (FULL_DECODE_ONLY) are NPU graphs; CPU runs eager"),
    FlagRewrite("--additional-config", True, DROP, "vllm-ascend's keys (ascend_scheduler_config ...), unknown on CPU"),
    FlagRewrite("--model-loader-extra-config", True, DROP, "the dummy loader reads no weight files"),
    FlagRewrite("--load-format", True, DROP, "replaced by `dummy` (ADDED): random weights, no 292 GB, nothing fetched"),
    FlagRewrite("--host", True, DROP, "the pod's IP, as the kubelet's network gives it (added last)"),
    FlagRewrite("--port", True, DROP, "the pod's engine port (added last)"),
)
#: Flags added after the pod's: dummy weights, eager execution (no graph capture on CPU), the weights' dtype.
ADDED: tuple[str, ...] = ("--load-format", "dummy", "--enforce-eager", "--dtype", "bfloat16")
#: Flags of a multi-node group member: the real tier runs single-node services only.
GROUP_FLAGS = ("--headless", "--data-parallel-address", "--data-parallel-rpc-port", "--data-parallel-start-rank")
#: Environment of every real engine (see the module docstring); KV space in GiB for the CPU cache.
ENV: Mapping[str, str] = {
    "VLLM_HOST_IP": "127.0.0.1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "OMP_NUM_THREADS": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


class Untranslatable(ValueError):
    """The pod's args ask for something the CPU engine cannot stand in for."""


def translate(args: Sequence[str], *, model_dir: Path, host: str, port: int, drop: Sequence[str] = ()) -> list[str]:
    """`serve MODEL flags...` (the pod's args after `vllm`) -> the API server's args (`--model` first).

    `drop`: flags to lose with their values, the harness's `drop-args` fault (AIS_SIM_DROP_ARGS, as for the
    simulator): the seed's lost continuation line, on the real engine."""
    if list(args[:1]) != ["serve"] or len(args) < 2:
        raise Untranslatable(f"not a `vllm serve MODEL ...` command: {list(args[:2])}")
    group = [f for f in GROUP_FLAGS if f in args]
    if group:
        raise Untranslatable(f"a multi-node group member ({', '.join(group)}): the real tier runs single-node pods")
    rules = {r.flag: r for r in RULES}
    rules |= {f: FlagRewrite(f, not _is_switch(f, args), DROP, "drop-args fault") for f in drop}
    out = ["--model", str(model_dir)]
    rest = list(args[2:])
    i = 0
    while i < len(rest):
        token = rest[i]
        i += 1
        flag, inline, _ = token.partition("=")
        rule = rules.get(flag)
        if rule is None:
            out.append(token)  # a flag, or the value of the flag before it: unchanged
            continue
        if rule.takes_value and not inline:
            i += 1  # its value, in the next token
        if rule.value is not None:
            out += [flag, rule.value]
    return [*out, *ADDED, "--host", host, "--port", str(port)]


#: vLLM's API server entry point: `vllm serve` without the CLI wrapper, whose --version reads the metadata
#: of a distribution named `vllm` (vllm/entrypoints/cli/main.py:81) and so fails for `vllm-cpu`; the same
#: parser (make_arg_parser), the model as --model (vllm/entrypoints/openai/api_server.py:726-738).
API_SERVER = "vllm.entrypoints.openai.api_server"


def _is_switch(flag: str, args: Sequence[str]) -> bool:
    """A flag given without a value (`--enable-x`, or last): the next token is another flag."""
    at = list(args).index(flag) if flag in args else -1
    return at < 0 or at + 1 >= len(args) or args[at + 1].startswith("--")


def drop_args(env: Mapping[str, str]) -> tuple[str, ...]:
    """The drop-args fault's flags from the environment (AIS_SIM_DROP_ARGS, comma-separated)."""
    return tuple(f.strip() for f in env.get("AIS_SIM_DROP_ARGS", "").split(",") if f.strip())


def find_python() -> str:
    """The Python of the real engine's install: $AIS_VLLM_PYTHON (the path hack/real-vllm.sh prints)."""
    given = os.environ.get("AIS_VLLM_PYTHON")
    if not given or not Path(given).is_file():
        raise FileNotFoundError(
            f"no real vLLM: AIS_VLLM_PYTHON={given!r}; set it to the path `hack/real-vllm.sh` prints last"
        )
    return given


def command(
    python: str, args: Sequence[str], *, host: str, port: int, cache: Path, drop: Sequence[str] = ()
) -> list[str]:
    """The full command line of one real engine (the tiny model made under `cache` if missing)."""
    model = tinymodel.ensure(cache)
    return [python, "-m", API_SERVER, *translate(args, model_dir=model, host=host, port=port, drop=drop)]


def environment(base: Mapping[str, str], secrets: Mapping[str, str]) -> dict[str, str]:
    """The engine's environment: the harness's own (PATH, HOME), the pod's Secret values, then ENV."""
    return {**base, **secrets, **ENV}


def table_markdown() -> str:
    """RULES and ADDED as the Markdown table docs/real-engine.md carries (a test keeps the two equal)."""
    rows = ["| flag | becomes | why |", "|---|---|---|"]
    for rule in RULES:
        becomes = "dropped" if rule.value is None else f"`{rule.flag} {rule.value}`"
        rows.append(f"| `{rule.flag}` | {becomes} | {rule.reason} |")
    rows.append(f"| (added) | `{' '.join(ADDED)}` | dummy weights, eager execution, the weights' dtype |")
    rows.append("| the model path | `--model <tiny model>` | aissim/tinymodel.py, made on the spot |")
    return "\n".join(rows) + "\n"
