"""An independent reading of `vllm serve` command lines, for tests.

It declares the flags the way vLLM's argparse does (BooleanOptionalAction for switches, JSON for config
flags, `--flag=value` and `--flag value` both accepted) so that rendered args are checked by parsing them,
not by comparing them with the renderer's own strings. The flag set and forms come from the engine
contract, which tests/contract/ holds against vLLM 0.25.1's own argparse definitions.
"""

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from ascend_operator.contract import flags as F
from ascend_operator.contract.flags import Form


def serve_parser() -> argparse.ArgumentParser:
    """Every vLLM 0.25.1 `vllm serve` option, declared from the engine contract (itself held against
    vLLM's sources by tests/contract/): a rendered flag vLLM would not accept shows up as unknown."""
    p = argparse.ArgumentParser(prog="vllm serve", exit_on_error=False)
    p.add_argument("model")
    for flag in F.ALL.values():
        names = [flag.name, *flag.aliases]
        if flag.form is Form.BOOL:
            p.add_argument(*names, action=argparse.BooleanOptionalAction, default=None)
        elif flag.form is Form.STORE_TRUE:
            p.add_argument(*names, action="store_true", default=None)
        elif flag.form is Form.OPTIONAL:
            p.add_argument(*names, nargs="?", const=True)
        elif flag.form is Form.JSON:
            p.add_argument(*names, type=json.loads)
        else:
            p.add_argument(*names, type=flag.value_type)
    for flag in F.TYPED:
        for short in flag.shorthands:
            p.add_argument(short)
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
