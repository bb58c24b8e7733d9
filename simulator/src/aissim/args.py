"""Parses a `vllm serve` command line (plus `--sim-*` flags and AIS_SIM_* env vars) into a SimConfig.

Why this module exists: a rendered pod's args must start the simulator unchanged, so it has to accept what
`vllm serve` accepts: `--flag value` and `--flag=value`, underscores or dashes, BooleanOptional pairs, JSON
configs, and flags it does not model (recorded, never rejected). Simulator-only knobs are prefixed
`--sim-` so they can never clash with a vLLM flag, and each has an env var so a harness can change the
time scale without editing pod args. `--sim-drop-args` reproduces the seed's truncated shell line: the
named vLLM flags are removed from argv before parsing, so the engine runs as if they were never given.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aissim.calibration import REFERENCE_UTILIZATION
from aissim.group import GroupArgs, group_args

# vLLM flags that take no value (BooleanOptionalAction or store_true in vLLM's EngineArgs / frontend args).
_BOOL_FLAGS = (
    "enable-expert-parallel",
    "enable-prefix-caching",
    "enable-chunked-prefill",
    "enforce-eager",
    "trust-remote-code",
    "enable-auto-tool-choice",
    "enable-prompt-tokens-details",
    "disable-hybrid-kv-cache-manager",
    "async-scheduling",
    "disable-log-requests",
    "disable-log-stats",
    "enable-log-requests",
)
# vLLM flags taking one value that the simulator reads or reports but does not model further.
_VALUE_FLAGS = (
    "tokenizer",
    "tokenizer-mode",
    "tool-call-parser",
    "reasoning-parser",
    "quantization",
    "dtype",
    "kv-cache-dtype",
    "seed",
    "api-key",
    "uvicorn-log-level",
    "distributed-executor-backend",
    "pipeline-parallel-size",
    "swap-space",
    "max-seq-len-to-capture",
    "revision",
    "download-dir",
    "load-format",
)
_JSON_FLAGS = ("speculative-config", "compilation-config", "additional-config", "model-loader-extra-config")

ENV_PREFIX = "AIS_SIM_"


@dataclass(frozen=True)
class SimOptions:
    """Simulator-only settings (`--sim-*` flags, falling back to AIS_SIM_* env vars)."""

    time_scale: float = 1.0
    acceptance_profile: str = "real"
    faults: tuple[str, ...] = ()
    load_seconds: float = 0.0
    drop_args: tuple[str, ...] = ()
    seed: int = 0


@dataclass(frozen=True)
class SimConfig:
    """The effective engine configuration, as vLLM would have it after parsing its command line."""

    model: str
    served_model_names: tuple[str, ...]
    host: str
    port: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    tensor_parallel_size: int
    data_parallel_size: int
    block_size: int
    enable_prefix_caching: bool
    enable_prompt_tokens_details: bool
    speculative_config: dict[str, Any] | None
    compilation_config: dict[str, Any] | None
    additional_config: dict[str, Any] | None
    model_loader_extra_config: dict[str, Any] | None
    known: dict[str, Any]
    unknown: tuple[str, ...]
    dropped: tuple[str, ...]
    argv: tuple[str, ...]
    sim: SimOptions = field(default_factory=SimOptions)
    group: GroupArgs | None = None
    """A multi-node group's flags; None for a single-node engine."""

    @property
    def num_speculative_tokens(self) -> int:
        if not self.speculative_config:
            return 0
        return int(self.speculative_config.get("num_speculative_tokens", 0) or 0)

    @property
    def served_model_name(self) -> str:
        return self.served_model_names[0]


class ArgsError(ValueError):
    """The command line cannot start an engine (vLLM would exit with a usage error too)."""


def _normalise(token: str) -> str:
    """vLLM's FlexibleArgumentParser accepts `--max_model_len` for `--max-model-len`; fold to dashes."""
    if not token.startswith("--"):
        return token
    name, sep, value = token.partition("=")
    return name.replace("_", "-") + sep + value


def _takes_value(name: str) -> bool:
    bare = name[2:]
    if bare.startswith("no-"):
        return False
    return bare not in _BOOL_FLAGS


def drop_flags(argv: Sequence[str], flags: Sequence[str]) -> tuple[list[str], list[str]]:
    """Remove the named flags (and their values) from argv; returns (kept, dropped tokens)."""
    wanted = {_normalise(f if f.startswith("--") else "--" + f) for f in flags}
    kept: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(argv):
        token = _normalise(argv[i])
        name = token.split("=", 1)[0]
        if name in wanted:
            dropped.append(argv[i])
            has_value = "=" not in token and _takes_value(name) and i + 1 < len(argv)
            if has_value and not argv[i + 1].startswith("--"):
                dropped.append(argv[i + 1])
                i += 1
        else:
            kept.append(argv[i])
        i += 1
    return kept, dropped


def parse_json_arg(raw: str | None, *, flag: str) -> dict[str, Any] | None:
    """vLLM parses these flags as JSON; tolerate a layer of shell quotes left in a rendered args list."""
    if raw is None:
        return None
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArgsError(f"{flag}: not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ArgsError(f"{flag}: expected a JSON object")
    return value


def _join_drop_args(argv: list[str]) -> list[str]:
    """`--sim-drop-args --speculative-config` names a flag as its value; argparse would read that value
    as a flag of its own, so glue it on as `--sim-drop-args=--speculative-config`."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "--sim-drop-args" and i + 1 < len(argv):
            out.append(f"--sim-drop-args={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def _sim_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="aissim serve", add_help=False, allow_abbrev=False, exit_on_error=False)
    p.add_argument("--sim-time-scale", type=float)
    p.add_argument("--sim-acceptance-profile", choices=("real", "synthetic"))
    p.add_argument("--sim-fault", action="append", default=[])
    p.add_argument("--sim-load-seconds", type=float)
    p.add_argument("--sim-drop-args", action="append", default=[])
    p.add_argument("--sim-seed", type=int)
    return p


def _vllm_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm serve", add_help=False, allow_abbrev=False)
    p.add_argument("model_tag", nargs="?")
    p.add_argument("--model")
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name", nargs="+")
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=int)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    # multi-node groups (aissim/group.py); vLLM 0.25.1 vllm/engine/arg_utils.py:1043-1066
    p.add_argument("--data-parallel-size-local", "-dpl", type=int)
    p.add_argument("--data-parallel-address", "-dpa")
    p.add_argument("--data-parallel-rpc-port", "-dpp", type=int)
    p.add_argument("--data-parallel-start-rank", "-dpr", type=int)
    p.add_argument("--headless", action="store_true", default=None)
    p.add_argument("--block-size", type=int)
    for flag in _JSON_FLAGS:
        p.add_argument("--" + flag)
    for flag in _VALUE_FLAGS:
        p.add_argument("--" + flag)
    for flag in _BOOL_FLAGS:
        p.add_argument("--" + flag, action=argparse.BooleanOptionalAction, default=None)
    return p


def _env_list(env: Mapping[str, str], name: str, sep: str) -> list[str]:
    raw = env.get(ENV_PREFIX + name, "")
    return [item.strip() for item in raw.split(sep) if item.strip()]


def _sim_options(ns: argparse.Namespace, env: Mapping[str, str]) -> SimOptions:
    def pick(value: Any, name: str, conv: Any, default: Any) -> Any:
        if value is not None:
            return value
        raw = env.get(ENV_PREFIX + name)
        return conv(raw) if raw not in (None, "") else default

    scale = float(pick(ns.sim_time_scale, "TIME_SCALE", float, 1.0))
    if scale <= 0:
        raise ArgsError("--sim-time-scale must be > 0")
    profile = str(pick(ns.sim_acceptance_profile, "ACCEPTANCE_PROFILE", str, "real"))
    if profile not in ("real", "synthetic"):
        raise ArgsError(f"acceptance profile {profile!r}: expected real or synthetic")
    faults = list(ns.sim_fault) or _env_list(env, "FAULTS", ";")
    drop: list[str] = []
    for item in list(ns.sim_drop_args) or _env_list(env, "DROP_ARGS", ";"):
        drop.extend(x.strip() for x in item.split(",") if x.strip())
    return SimOptions(
        time_scale=scale,
        acceptance_profile=profile,
        faults=tuple(faults),
        load_seconds=float(pick(ns.sim_load_seconds, "LOAD_SECONDS", float, 0.0)),
        drop_args=tuple(drop),
        seed=int(pick(ns.sim_seed, "SEED", int, 0)),
    )


def _unknown_flags(extra: Sequence[str]) -> tuple[str, ...]:
    """Pair unknown `--flag value` tokens so the record reads like the command line."""
    out: list[str] = []
    i = 0
    while i < len(extra):
        token = extra[i]
        paired = token.startswith("-") and "=" not in token and i + 1 < len(extra)
        if paired and not extra[i + 1].startswith("-"):
            out.append(f"{token}={extra[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return tuple(out)


def parse_serve_args(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> SimConfig:
    """Parse the arguments after `serve` (model path first, as `vllm serve` takes them)."""
    environ = os.environ if env is None else env
    normalised = _join_drop_args([_normalise(t) for t in argv])
    try:
        sim_ns, rest = _sim_parser().parse_known_args(normalised)
    except (SystemExit, argparse.ArgumentError) as exc:
        raise ArgsError(f"invalid --sim-* arguments in: {' '.join(argv)}") from exc
    sim = _sim_options(sim_ns, environ)
    kept, dropped = drop_flags(rest, sim.drop_args)
    try:
        ns, extra = _vllm_parser().parse_known_args(kept)
    except SystemExit as exc:  # argparse exits on a malformed known flag (e.g. --port abc)
        raise ArgsError(f"invalid vllm serve arguments: {' '.join(kept)}") from exc
    model = ns.model_tag or ns.model
    if not model:
        raise ArgsError("vllm serve: a model path is required")
    tp = int(ns.tensor_parallel_size)
    mbt = ns.max_num_batched_tokens
    max_model_len = int(ns.max_model_len or 163840)
    mbt_value = int(mbt) if mbt else 8192
    spec = parse_json_arg(ns.speculative_config, flag="--speculative-config")
    known = {k: v for k, v in vars(ns).items() if v is not None and k != "model_tag"}
    return SimConfig(
        model=model,
        served_model_names=tuple(ns.served_model_name or [model]),
        host=ns.host,
        port=int(ns.port),
        max_model_len=max_model_len,
        max_num_seqs=int(ns.max_num_seqs),
        max_num_batched_tokens=mbt_value,
        gpu_memory_utilization=float(ns.gpu_memory_utilization or REFERENCE_UTILIZATION),
        tensor_parallel_size=tp,
        data_parallel_size=int(ns.data_parallel_size),
        block_size=int(ns.block_size or 128),
        enable_prefix_caching=ns.enable_prefix_caching is not False,
        enable_prompt_tokens_details=bool(ns.enable_prompt_tokens_details),
        speculative_config=spec,
        compilation_config=parse_json_arg(ns.compilation_config, flag="--compilation-config"),
        additional_config=parse_json_arg(ns.additional_config, flag="--additional-config"),
        model_loader_extra_config=parse_json_arg(ns.model_loader_extra_config, flag="--model-loader-extra-config"),
        known={"model": model, **known},
        unknown=_unknown_flags(extra),
        dropped=tuple(dropped),
        argv=tuple(argv),
        sim=sim,
        group=group_args(
            size=int(ns.data_parallel_size),
            local=ns.data_parallel_size_local,
            address=ns.data_parallel_address,
            rpc_port=ns.data_parallel_rpc_port,
            start_rank=ns.data_parallel_start_rank,
            headless=bool(ns.headless),
        ),
    )
