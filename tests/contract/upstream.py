"""Reads the real vLLM / vllm-ascend sources (fetched by hack/fetch-upstream.sh) for the contract tier.

Why: the engine contract is only worth something if it is held against the engine. This module reads the
sources, never imports them (no torch here): the `vllm serve` flags by walking the AST of the argparse
definitions (EngineArgs.add_cli_args, FrontendArgs fields, make_arg_parser), the metrics by their
`name="vllm:..."` constructors, the additional-config keys by the `.get("key"` reads in vllm_ascend.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@cache
def source_dirs() -> tuple[Path, Path]:
    """(vllm, vllm-ascend) source trees, fetched once per version (offline afterwards)."""
    out = subprocess.run(
        ["bash", str(REPO / "hack" / "fetch-upstream.sh")],
        check=True,
        capture_output=True,
        text=True,
        # the venv's own pip: a fresh machine need not have one on PATH
        env={**os.environ, "PIP": os.environ.get("PIP", str(Path(sys.executable).parent / "pip"))},
    ).stdout.split()
    return Path(out[0]), Path(out[1])


@dataclass(frozen=True)
class UpstreamFlag:
    """One option string of `vllm serve` as argparse declares it."""

    spelling: str
    dest: str
    annotation: str
    """The field's type hint in EngineArgs / FrontendArgs ("" when declared with explicit argparse kwargs)."""
    form: str
    """bool (BooleanOptionalAction: --x and --no-x), store_true, json, value or optional (bare or value)."""
    where: str
    """file:line of the long option string in its add_argument call (or of the frontend dataclass field)."""


def _annotations(tree: ast.Module, classes: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in classes:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    out.setdefault(item.target.id, ast.unparse(item.annotation))
    return out


def _form_of(annotation: str) -> str:
    """The argparse form vLLM's get_kwargs (vllm/engine/arg_utils.py) derives from a type hint."""
    parts = {p.strip() for p in annotation.split("|")}
    if "bool" in parts and "str" in parts:
        return "optional"
    if "bool" in parts:
        return "bool"
    if any(p.startswith("dict") or p.endswith("Config") or p.endswith("Config | None") for p in parts):
        return "json"
    return "value"


def _explicit_form(call: ast.Call) -> str | None:
    for kw in call.keywords:
        if kw.arg == "action":
            text = ast.unparse(kw.value)
            if "BooleanOptionalAction" in text:
                return "bool"
            if "store_true" in text:
                return "store_true"
        if kw.arg == "nargs" and ast.unparse(kw.value) == "'?'":
            return "optional"
    return None


def _field_of(call: ast.Call) -> str | None:
    for kw in call.keywords:
        if kw.arg is None and isinstance(kw.value, ast.Subscript):
            key = kw.value.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return key.value
    return None


def _calls(path: Path, rel: str, fields: dict[str, str]) -> list[UpstreamFlag]:
    tree = ast.parse(path.read_text())
    out: list[UpstreamFlag] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "add_argument":
            continue
        consts = [a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        consts = [a for a in consts if a.value.startswith("-")]
        names = [a.value for a in consts]
        if not names:
            continue
        field = _field_of(node)
        dest = field or names[0].lstrip("-").replace("-", "_")
        form = _explicit_form(node) or _form_of(fields.get(dest, "str"))
        out += [UpstreamFlag(n, dest, fields.get(dest, ""), form, f"{rel}:{consts[0].lineno}") for n in names]
    return out


def _frontend(path: Path, rel: str) -> list[UpstreamFlag]:
    tree = ast.parse(path.read_text())
    out: list[UpstreamFlag] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in ("BaseFrontendArgs", "FrontendArgs"):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    name = item.target.id
                    hint = ast.unparse(item.annotation)
                    spelling = "--" + name.replace("_", "-")
                    out.append(UpstreamFlag(spelling, name, hint, _form_of(hint), f"{rel}:{item.lineno}"))
    return out


@cache
def serve_flags() -> dict[str, UpstreamFlag]:
    """Every option string `vllm serve` accepts, by spelling (BooleanOptional `--no-x` included)."""
    vllm, _ = source_dirs()
    args_rel, cli_rel = "vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py"
    args_tree = ast.parse((vllm / args_rel).read_text())
    fields = _annotations(args_tree, ("EngineArgs", "AsyncEngineArgs"))
    found = _calls(vllm / args_rel, args_rel, fields) + _calls(vllm / cli_rel, cli_rel, {})
    found += _frontend(vllm / cli_rel, cli_rel)
    out: dict[str, UpstreamFlag] = {}
    for flag in found:
        out.setdefault(flag.spelling, flag)
        if flag.form == "bool" and flag.spelling.startswith("--"):
            neg = "--no-" + flag.spelling[2:]
            out.setdefault(neg, UpstreamFlag(neg, flag.dest, flag.annotation, "bool", flag.where))
    return out


@cache
def metric_names() -> dict[str, str]:
    """`vllm:*` metric name -> file:line of its constructor, over vllm/v1/metrics and spec_decode."""
    vllm, _ = source_dirs()
    out: dict[str, str] = {}
    for rel in ("vllm/v1/metrics/loggers.py", "vllm/v1/spec_decode/metrics.py"):
        for lineno, line in enumerate((vllm / rel).read_text().splitlines(), start=1):
            for match in re.finditer(r"\"(vllm:[a-z_]+)\"", line):
                out.setdefault(match.group(1), f"{rel}:{lineno}")
    return out


def read_upstream(rel: str, *, ascend: bool = False) -> str:
    """The text of one upstream file."""
    vllm, vllm_ascend = source_dirs()
    return ((vllm_ascend if ascend else vllm) / rel).read_text()
