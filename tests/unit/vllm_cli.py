"""An independent reading of `vllm serve` command lines, for tests.

It declares the flags the way vLLM's argparse does (BooleanOptionalAction for switches, JSON for config
flags, `--flag=value` and `--flag value` both accepted) so that rendered args are checked by parsing them,
not by comparing them with the renderer's own strings.
"""

import argparse
import json
import shlex
from pathlib import Path
from typing import Any


def serve_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm serve", exit_on_error=False)
    p.add_argument("model")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--served-model-name")
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--max-num-batched-tokens", type=int)
    p.add_argument("--gpu-memory-utilization", type=float)
    p.add_argument("--max-num-seqs", type=int)
    p.add_argument("--data-parallel-size", type=int, default=1)
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.add_argument("--enable-expert-parallel", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--tokenizer-mode")
    p.add_argument("--tool-call-parser")
    p.add_argument("--enable-auto-tool-choice", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--reasoning-parser")
    p.add_argument("--disable-hybrid-kv-cache-manager", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--enable-prompt-tokens-details", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--model-loader-extra-config", type=json.loads)
    p.add_argument("--quantization")
    p.add_argument("--block-size", type=int)
    p.add_argument("--speculative-config", type=json.loads)
    p.add_argument("--compilation-config", type=json.loads)
    p.add_argument("--additional-config", type=json.loads)
    p.add_argument("--async-scheduling", action=argparse.BooleanOptionalAction, default=False)
    return p


def parse_serve(args: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Parse args after `vllm` (starting with `serve`); returns known settings and unknown extras."""
    assert args[0] == "serve", args
    return serve_parser().parse_known_args(args[1:])


def read_shell_profile(path: Path) -> tuple[dict[str, str], list[str]]:
    """The exports and the `vllm ...` argv of a shell profile like the seed's."""
    text = path.read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    argv: list[str] = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            env[name] = value
        elif words[0] == "vllm":
            argv = words
    return env, argv


def as_settings(ns: argparse.Namespace) -> dict[str, Any]:
    return dict(vars(ns))
