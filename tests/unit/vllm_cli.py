"""A reading of `vllm serve` command lines with vLLM 0.25.1's own argparse declarations, for tests.

The parser is declared from what tests/contract/upstream.py reads out of the vllm sdist (every option
string, its dest, its argparse form: BooleanOptionalAction, store_true, JSON, one value or an optional value,
and the field's int or float type), never from the engine contract the renderer uses: a rendered flag
vLLM does not declare shows up as unknown, and one it declares with another form or type fails to parse,
even when the contract has it wrong too. `--flag=value` and `--flag value` both parse, as in vLLM.
"""

import argparse
import json
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ascend_operator.contract.flags import Form
from tests.contract.upstream import serve_flags


@dataclass(frozen=True)
class Declaration:
    """One argparse option: its option strings (long name first), destination, form and value type."""

    spellings: tuple[str, ...]
    dest: str
    form: Form
    value_type: type = str


@cache
def upstream_declarations() -> tuple[Declaration, ...]:
    """One declaration per argparse dest of vLLM 0.25.1's `vllm serve`, from the sdist (BooleanOptional
    `--no-x` is added back by argparse itself); the value type is the field's int or float, else str."""
    flags = serve_flags()
    by_dest: dict[str, list[str]] = {}
    for spelling, flag in flags.items():
        if not (flag.form == "bool" and spelling.startswith("--no-")):
            by_dest.setdefault(flag.dest, []).append(spelling)
    out: list[Declaration] = []
    for dest, spellings in by_dest.items():
        first = flags[spellings[0]]
        parts = {p.strip() for p in first.annotation.split("|")}
        value_type = int if "int" in parts else float if "float" in parts else str
        longs = [s for s in spellings if s.startswith("--")]
        out.append(Declaration((*longs, *(s for s in spellings if s not in longs)), dest, Form(first.form), value_type))
    return tuple(out)


def upstream_dest(option: str) -> str:
    """The argparse dest vLLM 0.25.1 gives an option string (`--max-model-len` -> max_model_len)."""
    return serve_flags()[option].dest


def serve_parser(declarations: Iterable[Declaration] | None = None) -> argparse.ArgumentParser:
    """A `vllm serve` parser over `declarations` (default: vLLM 0.25.1's): a rendered flag the
    declarations do not hold shows up as unknown."""
    p = argparse.ArgumentParser(prog="vllm serve", exit_on_error=False)
    p.add_argument("model")
    for decl in upstream_declarations() if declarations is None else declarations:
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
