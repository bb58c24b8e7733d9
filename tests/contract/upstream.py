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


class _Sources:
    """Module-level names of the vLLM tree, read from the AST and followed through `from x import y`:
    what a field's type hint means once its aliases (`HfOverrides`, `MMDummyOptions`) are spelled out."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._trees: dict[str, ast.Module] = {}

    def tree(self, rel: str) -> ast.Module:
        if rel not in self._trees:
            self._trees[rel] = ast.parse((self.root / rel).read_text())
        return self._trees[rel]

    def module_rel(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for rel in (base + ".py", base + "/__init__.py"):
            if (self.root / rel).is_file():
                return rel
        return None

    def lookup(self, rel: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
        """(rel, ClassDef or alias expression) for a module-level `name` of `rel`, imports followed."""
        if depth > 8:
            return None
        for node in _module_level(self.tree(rel).body):
            if isinstance(node, ast.ClassDef) and node.name == name:
                return rel, node
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
                return (rel, node.value) if node.value is not None else None
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return rel, node.value
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name and (src := self.module_rel(_absolute(rel, node))):
                        return self.lookup(src, alias.name, depth + 1)
        return None

    def cls(self, rel: str, name: str) -> tuple[str, ast.ClassDef]:
        """(rel, ClassDef) of a class `rel` defines or imports."""
        found = self.lookup(rel, name)
        if found is None or not isinstance(found[1], ast.ClassDef):
            raise LookupError(f"class {name} (named in {rel}) not found")
        return found[0], found[1]

    def fields(self, rel: str, cls: ast.ClassDef) -> dict[str, str]:
        """field -> type hint of a (data)class, base classes' fields included (rel of the hint's module)."""
        out: dict[str, str] = {}
        for base in cls.bases:
            found = self.lookup(rel, ast.unparse(base))
            if found and isinstance(found[1], ast.ClassDef):
                out.update(self.fields(found[0], found[1]))
        for item in cls.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                out[item.target.id] = ast.unparse(item.annotation)
        return out

    def kinds(self, rel: str, hint: ast.expr, depth: int = 0) -> set[str]:
        """The top-level members of a type hint as vLLM's get_type_hints splits them (arg_utils.py:232-247):
        builtin names, `Literal`, `dataclass` (a config class) or `other` (any other non-builtin type)."""
        if depth > 12:
            return {"other"}
        if isinstance(hint, ast.Constant):
            if hint.value is None:
                return {"None"}
            return (
                self.kinds(rel, ast.parse(hint.value, mode="eval").body, depth + 1)
                if isinstance(hint.value, str)
                else {"other"}
            )
        if isinstance(hint, ast.BinOp) and isinstance(hint.op, ast.BitOr):
            return self.kinds(rel, hint.left, depth + 1) | self.kinds(rel, hint.right, depth + 1)
        if isinstance(hint, ast.Subscript):
            head = ast.unparse(hint.value).rpartition(".")[2]
            args = hint.slice.elts if isinstance(hint.slice, ast.Tuple) else [hint.slice]
            if head in ("Union", "Optional"):
                return set().union(*(self.kinds(rel, a, depth + 1) for a in args)) | (
                    {"None"} if head == "Optional" else set()
                )
            if head == "Annotated":
                return self.kinds(rel, args[0], depth + 1)
            if head in _BUILTIN_GENERICS:
                return {_BUILTIN_GENERICS[head]}
            return {"Literal"} if head == "Literal" else {"other"}
        name = ast.unparse(hint)
        if name in _BUILTINS:
            return {name}
        found = self.lookup(rel, name) if isinstance(hint, ast.Name) else None
        if found is None:
            return {"other"}
        src, node = found
        if isinstance(node, ast.ClassDef):
            decorators = {ast.unparse(d).split("(")[0].rpartition(".")[2] for d in node.decorator_list}
            return {"dataclass"} if decorators & {"config", "dataclass"} else {"other"}
        return self.kinds(src, node, depth + 1)  # type: ignore[arg-type]


_BUILTINS = frozenset({"bool", "str", "int", "float", "dict", "list", "tuple", "set", "None"})
_BUILTIN_GENERICS = {
    "dict": "dict",
    "Dict": "dict",
    "list": "list",
    "List": "list",
    "tuple": "tuple",
    "Tuple": "tuple",
    "set": "set",
}


def _absolute(rel: str, node: ast.ImportFrom) -> str:
    """The dotted module an import names, `from .attention import X` in vllm/config/vllm.py -> vllm.config.attention."""
    if node.level == 0:
        return node.module or ""
    package = rel.split("/")[: -node.level]
    return ".".join([*package, *([node.module] if node.module else [])])


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """A module's statements, those under `if TYPE_CHECKING:` / `try:` included."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            out += _module_level(node.body) + _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            out += _module_level(node.body)
        else:
            out.append(node)
    return out


def _form_of(kinds: set[str]) -> str:
    """The argparse form vLLM's _compute_kwargs (vllm/engine/arg_utils.py:331-385) gives a field, in its order:
    a config dataclass parses JSON, `bool | str | None` is optional-valued, any bool is BooleanOptional, Literal /
    collections / numbers take one value, and a dict (alone, or with str or a non-builtin type) parses JSON."""
    if "dataclass" in kinds:
        return "json"
    if kinds == {"bool", "str", "None"}:
        return "optional"
    if "bool" in kinds:
        return "bool"
    if kinds & {"Literal", "tuple", "list", "set", "int", "float"}:
        return "value"
    return "json" if "dict" in kinds else "value"


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


def _kwargs_of(call: ast.Call) -> tuple[str, str] | None:
    """`**model_kwargs["max_model_len"]` -> ("model_kwargs", "max_model_len")."""
    spreads = [kw.value for kw in call.keywords if kw.arg is None]
    # `**{**cache_kwargs["enable_prefix_caching"], "default": None}` (arg_utils.py:1166-1170)
    spreads += [
        v for d in spreads if isinstance(d, ast.Dict) for k, v in zip(d.keys, d.values, strict=True) if k is None
    ]
    return next((found for value in spreads if (found := _subscript(value)) is not None), None)


def _subscript(value: ast.expr) -> tuple[str, str] | None:
    """`model_kwargs["max_model_len"]` -> ("model_kwargs", "max_model_len")."""
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
        key = value.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return value.value.id, key.value
    return None


def _dest_of(call: ast.Call, names: list[str]) -> str:
    """argparse's dest: an explicit `dest=`, else the first long option string."""
    for kw in call.keywords:
        if kw.arg == "dest" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    long = [n for n in names if n.startswith("--")] or names
    return long[0].lstrip("-").replace("-", "_")


def _calls(src: _Sources, rel: str, fallback: dict[str, str]) -> list[UpstreamFlag]:
    """Every add_argument call of a file; a call spreading `**x_kwargs["field"]` has the form vLLM derives
    from `field` of the class `x_kwargs = get_kwargs(Class)` names (the config class, not EngineArgs)."""
    tree = src.tree(rel)
    classes: dict[str, str] = {}
    picked: dict[str, tuple[str, str]] = {}  # `moe_backend_kwargs = kernel_kwargs["moe_backend"]` (arg_utils.py:1494)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        value, target = node.value, node.targets[0].id
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "get_kwargs":
            classes[target] = ast.unparse(value.args[0])
        elif isinstance(value, ast.Subscript) and (spread := _subscript(value)) is not None:
            picked[target] = spread
    out: list[UpstreamFlag] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "add_argument":
            continue
        consts = [a for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")]
        names = [str(a.value) for a in consts]
        if not names:
            continue
        dest = _dest_of(node, names)
        hint, form = fallback.get(dest, ""), _explicit_form(node)
        spread = _kwargs_of(node) or next((picked[ast.unparse(k.value)] for k in node.keywords if k.arg is None), None)
        if spread is not None and spread[0] in classes:
            hint, form = _field_form(src, rel, classes[spread[0]], spread[1], explicit=form)
        out += [UpstreamFlag(n, dest, hint, form or "value", f"{rel}:{consts[0].lineno}") for n in names]
    return out


def _field_form(src: _Sources, rel: str, cls_name: str, field: str, *, explicit: str | None) -> tuple[str, str]:
    cls_rel, cls = src.cls(rel, cls_name)
    hint = src.fields(cls_rel, cls)[field]
    return hint, explicit or _form_of(
        src.kinds(_hint_module(src, cls_rel, cls, field), ast.parse(hint, mode="eval").body)
    )


def _hint_module(src: _Sources, rel: str, cls: ast.ClassDef, field: str) -> str:
    """The module whose names a field's hint uses: the class that declares the field (a base class may)."""
    if any(isinstance(i, ast.AnnAssign) and isinstance(i.target, ast.Name) and i.target.id == field for i in cls.body):
        return rel
    for base in cls.bases:
        found = src.lookup(rel, ast.unparse(base))
        if found and isinstance(found[1], ast.ClassDef) and field in src.fields(found[0], found[1]):
            return _hint_module(src, found[0], found[1], field)
    return rel


def _frontend(src: _Sources, rel: str) -> list[UpstreamFlag]:
    """FrontendArgs.add_cli_args registers `--<field>` for every field, typed by get_kwargs (cli_args.py:199-218)."""
    out: list[UpstreamFlag] = []
    for name, hint in src.fields(*src.cls(rel, "FrontendArgs")).items():
        _, form = _field_form(src, rel, "FrontendArgs", name, explicit=None)
        line = _field_line(src, rel, name)
        out.append(UpstreamFlag("--" + name.replace("_", "-"), name, hint, form, f"{rel}:{line}"))
    return out


def _field_line(src: _Sources, rel: str, field: str) -> int:
    for node in ast.walk(src.tree(rel)):
        if isinstance(node, ast.ClassDef) and node.name in ("BaseFrontendArgs", "FrontendArgs"):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id == field:
                    return item.lineno
    raise AssertionError(f"{field} is no frontend field in {rel}")


@cache
def serve_flags() -> dict[str, UpstreamFlag]:
    """Every option string `vllm serve` accepts, by spelling (BooleanOptional `--no-x` included)."""
    vllm, _ = source_dirs()
    src = _Sources(vllm)
    args_rel, cli_rel = "vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py"
    engine_hints: dict[str, str] = {}
    for node in ast.walk(src.tree(args_rel)):
        if isinstance(node, ast.ClassDef) and node.name in ("EngineArgs", "AsyncEngineArgs"):
            engine_hints.update(src.fields(args_rel, node))
    found = _calls(src, args_rel, engine_hints) + _calls(src, cli_rel, {}) + _frontend(src, cli_rel)
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
