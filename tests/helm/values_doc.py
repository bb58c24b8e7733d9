"""The chart's values table, generated from the `# --` comments in values.yaml (helm-docs' convention).

Why it exists: the README's values table is documentation users read before installing; generating it
from values.yaml (the only place a default is set) means it cannot go stale, and the same parser lets a
test require a comment on every key. Rewrite the README after changing values.yaml with:

    .venv/bin/python -m tests.helm.values_doc --write
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "ascend-inference-operator"
VALUES = CHART / "values.yaml"
README = CHART / "README.md"
START, END = "<!-- values:start -->", "<!-- values:end -->"
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?:\s|$)")


@dataclass(frozen=True)
class Row:
    """One key of values.yaml: its dotted path, its default and its comment ("" when it has none)."""

    path: str
    default: Any
    description: str


def _lookup(data: Any, path: list[str]) -> Any:
    for part in path:
        data = data[part]
    return data


def parse_values(text: str) -> list[Row]:
    """Every mapping key of values.yaml, in file order, with the `# --` comment block right above it."""
    data = yaml.safe_load(text) or {}
    rows: list[Row] = []
    stack: list[tuple[int, str]] = []
    comment: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            comment = None  # a blank line detaches a comment from the next key
            continue
        if stripped.startswith("# --"):
            comment = [stripped[4:].strip()]
            continue
        if stripped.startswith("#"):
            if comment is not None:
                comment.append(stripped[1:].strip())
            continue
        match = KEY.match(line)
        if match is None:  # a list item or a continuation of a value
            comment = None
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        path = [key for _, key in stack]
        rows.append(Row(".".join(path), _lookup(data, path), " ".join(comment or [])))
        comment = None
    return rows


def _has_children(rows: list[Row], row: Row) -> bool:
    return any(other.path.startswith(row.path + ".") for other in rows)


def values_table(rows: list[Row]) -> str:
    """The Markdown table: key, type, default (JSON; "see below" for sections), description."""
    lines = ["| Key | Type | Default | Description |", "|-----|------|---------|-------------|"]
    for row in rows:
        kind = {dict: "object", list: "list", str: "string", bool: "bool", int: "int", float: "float"}.get(
            type(row.default), "null"
        )
        default = "see below" if _has_children(rows, row) else f"`{json.dumps(row.default)}`"
        description = row.description.replace("|", "\\|")
        lines.append(f"| `{row.path}` | {kind} | {default} | {description} |")
    return "\n".join(lines) + "\n"


def replace_table(readme: str, table: str) -> str:
    """The README with the text between the values markers replaced by `table`."""
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the table in the chart's README.md")
    args = parser.parse_args(argv)
    table = values_table(parse_values(VALUES.read_text()))
    if args.write:
        README.write_text(replace_table(README.read_text(), table))
    else:
        sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
