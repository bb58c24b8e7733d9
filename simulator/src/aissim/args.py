"""Parses a `vllm serve` command line (plus `--sim-*` flags and AIS_SIM_* env vars) into a SimConfig.

Why this module exists: a rendered pod's args must start the simulator unchanged, and a command line vLLM
0.25.1 would refuse must not start it either. The option set and each option's form come from the engine
contract (`ascend_operator.contract.flags`, held against vLLM's argparse by tests/contract/): `--flag value`
and `--flag=value`, underscores or dashes, abbreviations, BooleanOptional pairs, JSON configs. An option vLLM
does not declare ends the start the way vLLM's argparse does: `vllm serve: error: unrecognized arguments:
...`, exit 2. vllm-ascend's block-size rewrite is applied for the model type (`--sim-model-type`, default the
seed's deepseek_v4), so the engine reports what vllm-ascend would. Simulator-only knobs are prefixed
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

from aissim.calibration import KV_LINK_GBPS, REFERENCE_UTILIZATION
from aissim.group import GroupArgs, group_args
from ascend_operator.contract import additional_config as ascend
from ascend_operator.contract import flags as F
from ascend_operator.contract.flags import Form

#: vLLM's own usage line for `vllm serve` (vllm/entrypoints/cli/serve.py:161).
VLLM_SERVE_USAGE = "usage: vllm serve [model_tag] [options]"

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
    model_type: str = "deepseek_v4"
    kv_transfer_gbps: float = KV_LINK_GBPS
    """GB/s per NPU a prompt's KV moves at between a prefill and a decode engine (calibration.KV_LINK_GBPS)."""
    dense: bool = False
    """The served model has no MoE layers: vLLM runs its DP ranks as independent engines
    (vllm/v1/engine/core.py:1189-1200), so a lost peer of a group stops only its own ranks."""


#: vllm-ascend 0.25.1rc1's DeepSeek-V4 KV cache groups by cache block size: MLA, SWA, C4 compressor state, C128
#: compressor state (vllm_ascend/models/layer/attention/layer.py:32-37, read by models/deepseek_v4.py:124-199,
#: 654, 662). Atlas A5's table (layer.py:39-43) differs in the C128 state only, with the same minimum. A model
#: type not listed has one group of the cache block size.
KV_GROUP_BLOCK_SIZES: dict[str, dict[int, tuple[int, ...]]] = {
    "deepseek_v4": {128: (128, 128, 8, 32), 64: (64, 64, 4, 16), 32: (32, 32, 2, 8)},
}


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
    """After vllm-ascend's rewrite (what CacheConfig and `vllm:cache_config_info` report)."""
    requested_block_size: int | None
    enable_prefix_caching: bool
    enable_prompt_tokens_details: bool
    speculative_config: dict[str, Any] | None
    compilation_config: dict[str, Any] | None
    additional_config: dict[str, Any] | None
    model_loader_extra_config: dict[str, Any] | None
    known: dict[str, Any]
    dropped: tuple[str, ...]
    argv: tuple[str, ...] = field(repr=False)  # may hold an --api-key value
    sim: SimOptions = field(default_factory=SimOptions)
    group: GroupArgs | None = None
    """A multi-node group's flags; None for a single-node engine."""
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    """Bearer tokens /v1 requires: `--api-key` over VLLM_API_KEY, as
    vllm/entrypoints/openai/api_server.py:251-255 takes them; empty: no key."""
    kv_transfer_config: dict[str, Any] | None = None
    """`--kv-transfer-config`: with a kv_role the engine is a prefill or decode engine (aissim/kvtransfer.py)."""
    host_ip: str | None = None
    """VLLM_HOST_IP: the address a prefill engine publishes for its KV (vLLM's get_ip())."""
    kv_abort_seconds: float = 480.0
    """VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT: how long a prefill engine holds KV no decode engine pulled
    (vllm/envs.py:1661-1662, default 480)."""

    @property
    def num_speculative_tokens(self) -> int:
        if not self.speculative_config:
            return 0
        return int(self.speculative_config.get("num_speculative_tokens", 0) or 0)

    @property
    def served_model_name(self) -> str:
        return self.served_model_names[0]

    @property
    def reported_block_size(self) -> int:
        """The `block_size` CacheConfig (and `vllm:cache_config_info`) holds once the KV cache is built: the
        smallest block size among the KV cache groups (vllm/v1/engine/core.py:305-311, passed to the frontend
        in the ready response, core_client.py:731-734), not the `--block-size` vllm-ascend kept."""
        groups = KV_GROUP_BLOCK_SIZES.get(self.sim.model_type, {}).get(self.block_size)
        return min(groups) if groups else self.block_size


class ArgsError(ValueError):
    """The command line cannot start an engine (vLLM would exit with a usage error too)."""


class UnsupportedFeature(ArgsError):
    """vLLM's EngineArgs raise NotImplementedError once the args parsed: a traceback and exit 1, not 2."""


class UnrecognizedArguments(ArgsError):
    """Options vLLM 0.25.1 does not declare; str() is argparse's own error line."""

    def __init__(self, args: Sequence[str]) -> None:
        self.args_given = tuple(args)
        super().__init__(f"vllm serve: error: unrecognized arguments: {' '.join(args)}")


def _normalise(token: str) -> str:
    """vLLM's FlexibleArgumentParser accepts `--max_model_len` for `--max-model-len`; fold to dashes
    (up to the first dot, vllm/utils/argparse_utils.py:301-323)."""
    if not token.startswith("--"):
        return token
    name, sep, value = token.partition("=")
    head, dot, rest = name.partition(".")
    return head.replace("_", "-") + dot + rest + sep + value


def _takes_value(name: str) -> bool:
    flag = F.BY_SPELLING.get(F.option_name(name) or name)
    return flag is None or name in flag.shorthands or flag.takes_value


def _merge_dotted(argv: list[str]) -> list[str]:
    """`--compilation-config.cudagraph_mode FULL` -> one `--compilation-config {...}` (argparse_utils.py:388-417)."""
    out: list[str] = []
    merged: dict[str, dict[str, Any]] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        name = token.split("=", 1)[0]
        head = name.split(".", 1)[0]
        flag = F.BY_SPELLING.get(head)
        if token.startswith("-") and "." in name and flag is not None and flag.form is Form.JSON:
            if "=" in token:
                raw = token.split("=", 1)[1]
            else:
                raw = argv[i + 1] if i + 1 < len(argv) else ""
                i += 1
            try:
                value: Any = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
            node = merged.setdefault(flag.name, {})
            *parents, leaf = name.split(".")[1:]
            for key in parents:
                node = node.setdefault(key, {})
            node[leaf] = value
        else:
            out.append(token)
        i += 1
    for name, obj in merged.items():
        out += [name, json.dumps(obj)]
    return out


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
    p.add_argument("--sim-model-type")
    p.add_argument("--sim-dense", action="store_true", default=None)
    p.add_argument("--sim-kv-transfer-gbps", type=float)
    return p


_DEFAULTS: dict[str, Any] = {
    "host": "0.0.0.0", "port": 8000, "max_num_seqs": 256, "gpu_memory_utilization": 0.9,
    "tensor_parallel_size": 1, "data_parallel_size": 1,
}  # fmt: skip


def _vllm_parser() -> argparse.ArgumentParser:
    """vLLM 0.25.1's `vllm serve` options, from the engine contract (argparse's allow_abbrev stays on, as in vLLM)."""
    p = argparse.ArgumentParser(prog="vllm serve", add_help=False, exit_on_error=False)
    p.add_argument("model_tag", nargs="?")
    for flag in F.ALL.values():
        names = [flag.name, *flag.aliases]
        dest = flag.name[2:].replace("-", "_")
        if flag.form is Form.BOOL:
            p.add_argument(*names, dest=dest, action=argparse.BooleanOptionalAction, default=None)
        elif flag.form is Form.STORE_TRUE:
            p.add_argument(*names, dest=dest, action="store_true", default=None)
        elif flag.form is Form.OPTIONAL:
            p.add_argument(*names, dest=dest, nargs="?", const=True)
        elif flag is F.SERVED_MODEL_NAME:
            p.add_argument(*names, dest=dest, nargs="+")
        else:
            p.add_argument(*names, dest=dest, type=flag.value_type, default=_DEFAULTS.get(dest))
        for short in flag.shorthands:
            p.add_argument(short, dest=short[2:].replace("-", "_"))
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
    gbps = float(pick(ns.sim_kv_transfer_gbps, "KV_TRANSFER_GBPS", float, KV_LINK_GBPS))
    if gbps <= 0:
        raise ArgsError("--sim-kv-transfer-gbps must be > 0")
    return SimOptions(
        kv_transfer_gbps=gbps,
        time_scale=scale,
        acceptance_profile=profile,
        faults=tuple(faults),
        load_seconds=float(pick(ns.sim_load_seconds, "LOAD_SECONDS", float, 0.0)),
        drop_args=tuple(drop),
        seed=int(pick(ns.sim_seed, "SEED", int, 0)),
        model_type=str(pick(ns.sim_model_type, "MODEL_TYPE", str, "deepseek_v4")),
        dense=bool(pick(ns.sim_dense, "DENSE", lambda raw: raw.lower() in ("1", "true", "yes"), False)),
    )


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
        ns, extra = _vllm_parser().parse_known_args(_merge_dotted(kept))
    except (SystemExit, argparse.ArgumentError) as exc:  # a malformed known flag (e.g. --port abc)
        raise ArgsError(f"invalid vllm serve arguments: {' '.join(kept)}: {exc}") from exc
    if extra:
        raise UnrecognizedArguments(extra)
    if any(getattr(ns, name) not in (None, 1) for name in ("max_num_partial_prefills", "max_long_partial_prefills")):
        # EngineArgs._check_feature_supported (vllm/engine/arg_utils.py:2369-2379, 2711-2716): the V1 engine
        raise UnsupportedFeature("Concurrent Partial Prefill is not supported. We recommend to remove "
                                 "Concurrent Partial Prefill from your config.")  # fmt: skip
    model = ns.model_tag or ns.model
    if not model:
        raise ArgsError("vllm serve: a model path is required")
    tp = int(ns.tensor_parallel_size)
    mbt = ns.max_num_batched_tokens
    max_model_len = int(ns.max_model_len or 163840)
    mbt_value = int(mbt) if mbt else 8192
    spec = parse_json_arg(ns.speculative_config, flag="--speculative-config")
    # the key is never echoed (logs, /sim/state): only whether one is set
    known = {k: v for k, v in vars(ns).items() if v is not None and k not in ("model_tag", "api_key")}
    # the contract reads --api-key as one value (vLLM's own parser takes a list, cli_args.py:264)
    api_keys = tuple(key for key in ([ns.api_key] if ns.api_key else [environ.get("VLLM_API_KEY")]) if key)
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
        block_size=ascend.effective_block_size(ns.block_size, model_type=sim.model_type),
        requested_block_size=ns.block_size,
        enable_prefix_caching=ns.enable_prefix_caching is not False,
        enable_prompt_tokens_details=bool(ns.enable_prompt_tokens_details),
        speculative_config=spec,
        compilation_config=parse_json_arg(ns.compilation_config, flag="--compilation-config"),
        additional_config=parse_json_arg(ns.additional_config, flag="--additional-config"),
        model_loader_extra_config=parse_json_arg(ns.model_loader_extra_config, flag="--model-loader-extra-config"),
        known={"model": model, **known},
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
        api_keys=api_keys,
        kv_transfer_config=parse_json_arg(ns.kv_transfer_config, flag="--kv-transfer-config"),
        host_ip=environ.get("VLLM_HOST_IP") or None,
        kv_abort_seconds=_env_seconds(environ, "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT", 480.0),
    )


def _env_seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw in (None, ""):
        return default
    try:
        return float(raw)
    except ValueError:
        raise ArgsError(f"{name}={raw!r}: expected a number of seconds") from None
