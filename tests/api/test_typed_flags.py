"""A typed vLLM flag is its contract entry plus its api field: render/args.py has no per-flag code.

Why: adding a flag once meant editing the contract, the api model, render/args.py, a test's hand-written
expectation, the generated CRDs and README. Now the contract entry names the spec field it carries and
render/args.py derives the argument from any entry the same way; these tests fail when a flag is rendered
by name in render/args.py again, when an entry names no field of the api model, or when an engine field
has no entry that carries it.
"""

import ast
import inspect
import typing
from types import UnionType
from typing import Any

import pytest
from pydantic import BaseModel

from ascend_operator.api.engine import EngineSpec
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.contract import flags as F
from ascend_operator.render import args as render_args

#: Engine fields that are no single `vllm serve` flag: they switch keys of a JSON flag, choose the contract's
#: version, or pass through as given.
NOT_A_FLAG = {"engine.long_context", "engine.engine_version", "engine.extra_args"}


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, UnionType):
        return next((m for a in typing.get_args(annotation) if (m := _model_of(a)) is not None), None)
    return None


def _field_exists(path: str) -> bool:
    model: type[BaseModel] | None = AscendInferenceServiceSpec
    for step in path.split("."):
        if model is None or step not in model.model_fields:
            return False
        model = _model_of(model.model_fields[step].annotation)
    return True


@pytest.mark.parametrize("flag", [f for f in F.TYPED if f.field is not None], ids=lambda f: f.name)
def test_every_entry_names_a_field_of_the_api_model(flag: F.Flag) -> None:
    assert flag.field is not None
    assert _field_exists(flag.field), f"{flag.name} carries {flag.field}, which the api model lacks"
    for switch, _keys in flag.switched:
        assert _field_exists(switch), switch


def test_every_engine_field_is_carried_by_an_entry_or_is_no_flag() -> None:
    carried = {f.field for f in F.TYPED} | {s.rpartition(".")[0] for f in F.TYPED for s, _ in f.switched}
    fields = {f"engine.{name}" for name in EngineSpec.model_fields}
    assert fields - carried - NOT_A_FLAG == set(), "an engine field no contract entry renders"


def test_every_entry_a_spec_sets_is_rendered_by_the_generic_path() -> None:
    rendered = {f.name for f in render_args.RENDERED}
    assert rendered == {f.name for f in F.TYPED if f.field is not None or f.fixed is not None}
    # what is left is set per node by a multi-node group (render/group.py)
    assert {f.name for f in F.TYPED} - rendered == {
        f.name for f in (F.DATA_PARALLEL_START_RANK, F.DATA_PARALLEL_SIZE_LOCAL, F.DATA_PARALLEL_ADDRESS)
    } | {F.DATA_PARALLEL_RPC_PORT.name, F.HEADLESS.name}


def test_render_args_names_no_flag() -> None:
    """No option literal and no contract entry by name: render/args.py knows forms, not flags."""
    tree = ast.parse(inspect.getsource(render_args))
    literals = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert [s for s in literals if s.startswith("-")] == []
    by_name = [
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "F" and n.attr.isupper()
    ]
    assert set(by_name) <= {"TYPED"}, f"render/args.py renders {by_name} by name"
