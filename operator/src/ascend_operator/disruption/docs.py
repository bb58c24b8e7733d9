"""docs/disruption.md's table of the kinds of deletion, generated from `KINDS`, so the page names every kind the
decision knows and the rules that hold for it, and a new kind reaches it without a hand edit
(`.venv/bin/python -m ascend_operator.disruption.docs docs/disruption.md`; tests/disruption/test_one_place.py
fails on drift)."""

import sys
from pathlib import Path

from ascend_operator.api.docs import block_in, with_block
from ascend_operator.disruption.model import KINDS

BLOCK = "kinds"
HEADER = (
    "| reason (`status.rolls[].reason`) | health: startup grace, `maxPerHour`, cooldown "
    "| never the last Ready replica | drained first | removes the replica | short grace (hung) "
    "| forced (grace 0, even when already terminating) | when |"
)


def kinds_table() -> str:
    """A Markdown table with one row per kind of deletion."""

    def mark(flag: bool) -> str:
        return "yes" if flag else ""

    rows = [
        f"| `{reason}` | {mark(k.health)} | {mark(k.serving)} | {mark(k.drains)} | {mark(k.removes)} "
        f"| {mark(k.hung)} | {mark(k.force)} | {k.why} |"
        for reason, k in KINDS.items()
    ]
    return "\n".join([HEADER, "|---|---|---|---|---|---|---|---|", *rows]) + "\n"


def table_in(page: str) -> str:
    """The kinds table a page carries between its markers."""
    return block_in(page, BLOCK)


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/disruption.md")
    target.write_text(with_block(target.read_text(), BLOCK, kinds_table()))
