"""A reading of `vllm serve` command lines with argparse, for tests.

It declares the flags the way vLLM's argparse does (BooleanOptionalAction for switches, JSON for config
flags, `--flag=value` and `--flag value` both accepted) so that rendered args are checked by parsing them,
not by comparing them with the renderer's own strings. The unit tier declares the flags from the engine
contract (`contract_declarations`), which is the renderer's own source of flags: there it proves the
renderer and its contract agree. The contract tier declares them from vLLM 0.25.1's sources instead
(tests/contract/test_rendered_args.py), which is what proves a rendered command is one vLLM accepts.
"""

import argparse
import json
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascend_operator.contract import flags as F
from ascend_operator.contract.flags import Form


@dataclass(frozen=True)
class Declaration:
    """One argparse option: its option strings (long name first), destination, form and value type."""

    spellings: tuple[str, ...]
    dest: str
    form: Form
    value_type: type = str


def contract_declarations() -> list[Declaration]:
    """Every `vllm serve` option as the engine contract declares it."""
    out = [
        Declaration((f.name, *f.aliases), f.name[2:].replace("-", "_"), f.form, f.value_type) for f in F.ALL.values()
    ]
    shorthands = [s for f in F.TYPED for s in f.shorthands]
    return out + [Declaration((s,), s[2:].replace("-", "_"), Form.VALUE) for s in shorthands]


def serve_parser(declarations: Iterable[Declaration] | None = None) -> argparse.ArgumentParser:
    """A `vllm serve` parser over `declarations` (default: the engine contract's): a rendered flag the
    declarations do not hold shows up as unknown."""
    p = argparse.ArgumentParser(prog="vllm serve", exit_on_error=False)
    p.add_argument("model")
    for decl in contract_declarations() if declarations is None else declarations:
        names, dest = decl.spellings, decl.dest
        if decl.form is Form.BOOL:
            p.add_argument(*names, dest=dest, action=argparse.BooleanOptionalAction, default=None)
        elif decl.form is Form.STORE_TRUE:
            p.add_argument(*names, dest=dest, action="store_true", default=None)
        elif decl.form is Form.OPTIONAL:
            p.add_argument(*names, dest=dest, nargs="?", const=True)
        elif decl.form is Form.JSON:
            p.add_argument(*names, dest=dest, type=json.loads)
        else:
            p.add_argument(*names, dest=dest, type=decl.value_type)
    return p


def parse_serve(
    args: list[str], declarations: Iterable[Declaration] | None = None
) -> tuple[argparse.Namespace, list[str]]:
    """Parse args after `vllm` (starting with `serve`); returns known settings and unknown extras."""
    assert args[0] == "serve", args
    return serve_parser(declarations).parse_known_args(args[1:])


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
