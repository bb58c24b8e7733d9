"""`vllm serve` flags that take away what the operator watches an engine through, refused in extraArgs.

Why: the operator judges an engine by three things its `vllm serve` provides: the `vllm:*` Prometheus
metrics the health detectors read, the plain-HTTP server on `host:port` that the probes (`/health`), the
scrape (`/metrics`) and the canary (`/v1/completions`) talk to, and a tokenizer for the canary's text
prompt. An extraArgs flag that removes one of them does not fail at start: the engine runs, and the
operator reads silence as a sick engine (or sees nothing at all) and acts on it. Such flags are refused in
every spelling vLLM's parser reads as them (`--x_y`, an unambiguous prefix, `--x=v`), by the Python rule and
by its CEL twin at `kubectl apply`, whatever spec.engine.engineVersion says. Paths are in the vllm 0.25.1
sdist; tests/contract/test_surface.py holds each reason against it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascend_operator.contract import flags as F


@dataclass(frozen=True, kw_only=True)
class SurfaceFlags:
    """Flags that take away one thing the operator relies on, with the rule that refuses them."""

    rule: str
    flags: tuple[str, ...]
    """Long spellings; a BooleanOptional flag's `--no-x` twin (the default) stays allowed."""
    message: str


SURFACE: tuple[SurfaceFlags, ...] = (
    SurfaceFlags(
        rule="ExtraArgsSilenceMetrics",
        flags=("--disable-log-stats",),
        message="spec.engine.extraArgs may not contain --disable-log-stats: vLLM then creates no stat loggers, "
        "the Prometheus one included (vllm/v1/engine/async_llm.py:124,157; vllm/v1/metrics/loggers.py:1333), "
        "so /metrics carries no vllm:* series and every health detector the operator runs reads nothing",
    ),
    SurfaceFlags(
        rule="ExtraArgsReplaceHttpServer",
        flags=("--grpc", "--uds", "--ssl-keyfile", "--ssl-certfile"),
        message="spec.engine.extraArgs may not contain --grpc, --uds, --ssl-keyfile or --ssl-certfile: the "
        "operator's probes (/health), metrics scrape (/metrics) and canary (/v1/completions) speak plain HTTP "
        "to the engine's host:port, and these flags serve a gRPC server instead (vllm/entrypoints/cli/serve.py:"
        "55), a unix socket instead of the port, or HTTPS (vllm/entrypoints/openai/api_server.py:572-587), so "
        "the pod never turns ready and the canary never answers",
    ),
    SurfaceFlags(
        rule="ExtraArgsBreakCanary",
        flags=("--skip-tokenizer-init", "--tokens-only"),
        message="spec.engine.extraArgs may not contain --skip-tokenizer-init or --tokens-only: the engine then "
        "has no tokenizer (--tokens-only sets skip_tokenizer_init, vllm/engine/arg_utils.py:2074) and refuses "
        "the canary's text prompt (vllm/renderers/base.py:159), so a healthy engine fails every canary",
    ),
)


def offending(args: list[str], flags: tuple[str, ...]) -> list[str]:
    """Items of `args` that vLLM's parser reads as one of `flags` (`--x.k` as `--x`)."""
    return [a for a in args if (F.option_name(a) or "").partition(".")[0] in flags]


def cel_pattern(flags: tuple[str, ...]) -> str:
    """An RE2 pattern matching an extraArgs item that vLLM reads as one of `flags`: `_` for `-`, any prefix
    naming only that option (argparse's allow_abbrev, contract.flags.option_name), then `=...` or `.key`."""
    return "^--(" + "|".join(_abbreviable(f) for f in flags) + ")([.=].*)?$"


def _abbreviable(flag: str) -> str:
    """`--grpc` -> `gr(p(c)?)?` when `--gr` is the shortest prefix no other option starts with."""
    others = [s for s in F.BY_SPELLING if s.startswith("--") and s != flag]
    # a flag that is itself a prefix of another option is only ever spelled out
    cut = next((n for n in range(3, len(flag) + 1) if not any(s.startswith(flag[:n]) for s in others)), len(flag))
    head, tail = flag[2:cut], flag[cut:]
    nested = ""
    for char in reversed(tail):
        nested = f"({_char(char)}{nested})?"
    return "".join(_char(c) for c in head) + nested


def _char(char: str) -> str:
    return "[-_]" if char == "-" else char
