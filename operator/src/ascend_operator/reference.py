"""The API reference joined with the engine contract: which vLLM flag each spec field renders, from the
contract's entry for it (`ascend_operator.contract.flags`, `Flag.field`), in the CRD's descriptions
(crd.py) and in docs/api.md (`python -m ascend_operator.reference docs/api.md`, `make docs`).

Why here: a field's description used to spell its flag by hand, a second copy of the contract entry
(~60 of them). The api models cannot import the contract (the api is the leaf), so the join lives above
both, beside the CRD generator, and a field's description says what the field means, never its flag:
tests/unit/test_flag_notes.py fails when one does. The same join gives docs/api.md's deletion reasons
their meaning, from the disruption model's kinds (`reason_notes`).
"""

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ascend_operator.api.docs import model_of, with_table
from ascend_operator.api.reasons import RollReason
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.contract.flags import TYPED, Flag, Form
from ascend_operator.disruption.model import KINDS


def alias_path(field: str, model: type[BaseModel] = AscendInferenceServiceSpec) -> tuple[str, ...] | None:
    """The spec's camelCase path of a contract field (`engine.max_model_len` -> engine, maxModelLen), or
    None when the field is not a field of the spec models."""
    steps: list[str] = []
    current: type[BaseModel] | None = model
    for part in field.split("."):
        info = None if current is None else current.model_fields.get(part)
        if info is None:
            return None
        steps.append(info.alias or part)
        current = model_of(info.annotation)
    return tuple(steps)


def note(flag: Flag) -> str:
    """What the field renders, in words a user greps for."""
    if flag.form is Form.BOOL and flag.negated:
        spelled = f"`--no-{flag.name[2:]}` when true, `{flag.name}` when false"
    elif flag.form is Form.BOOL and flag.says_false:
        spelled = f"`{flag.name}` when true, `--no-{flag.name[2:]}` when false"
    elif flag.positional:
        spelled = "the model argument after `vllm serve`"
    else:
        spelled = f"`{flag.name}`"
    return f"vLLM: {spelled} ({flag.source})."


def flag_notes() -> Iterator[tuple[tuple[str, ...], Flag]]:
    """(spec path, flag) for every typed flag whose field is a spec field."""
    for flag in TYPED:
        if flag.field is not None and (path := alias_path(flag.field)) is not None:
            yield path, flag


def doc_notes() -> dict[str, str]:
    """docs/api.md's notes by row path (`spec.engine.maxModelLen`)."""
    return {"spec." + ".".join(path): note(flag) for path, flag in flag_notes()}


def reason_notes() -> dict[str, str]:
    """docs/api.md's meaning of each deletion reason: its kind's `why` in the disruption model (the one
    place a deletion is described; the api's enum cannot import it)."""
    return {f"RollReason.{reason.name}": KINDS[reason].why for reason in RollReason}


def annotate_schema(spec_schema: dict[str, Any]) -> None:
    """Append each flagged field's note to its description in the spec's structural schema."""
    for path, flag in flag_notes():
        node = spec_schema
        for step in path:
            node = node["properties"][step]
        node["description"] = " ".join(t for t in (node.get("description", ""), note(flag)) if t)


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/api.md")
    target.write_text(with_table(target.read_text(), notes=doc_notes(), reason_notes=reason_notes()))
