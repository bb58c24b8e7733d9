"""Rendered `vllm serve` args parsed by a parser declared from vLLM 0.25.1's own argparse definitions.

Why: the unit tier parses rendered args with a parser built from the engine contract, the renderer's own
flag list, so it proves only that the two agree. Here the parser is declared from what tests/contract/upstream.py
reads out of the sdist (option strings, dest, argparse form, the field's type), so a rendered flag vLLM does
not declare, or declares with another form or type, fails here even when the contract has it wrong too.
"""

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings

from ascend_operator.api.parse import parse_resource, parse_spec
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.contract import flags as F
from ascend_operator.contract.flags import Form
from ascend_operator.render.args import build_engine_args
from ascend_operator.render.group import Role, with_role
from ascend_operator.validation import Severity, validate_spec
from tests.contract.upstream import serve_flags
from tests.unit.test_args_property import specs
from tests.unit.vllm_cli import Declaration, parse_serve

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def upstream_declarations() -> list[Declaration]:
    """One declaration per argparse dest of `vllm serve`, from the sdist (BooleanOptional `--no-x` is
    added back by argparse itself); the value type is the field's int or float, else str."""
    by_dest: dict[str, list[str]] = {}
    for spelling, flag in serve_flags().items():
        if not (flag.form == "bool" and spelling.startswith("--no-")):
            by_dest.setdefault(flag.dest, []).append(spelling)
    out: list[Declaration] = []
    for dest, spellings in by_dest.items():
        first = serve_flags()[spellings[0]]
        parts = {p.strip() for p in first.annotation.split("|")}
        value_type = int if "int" in parts else float if "float" in parts else str
        longs = [s for s in spellings if s.startswith("--")]
        out.append(Declaration((*longs, *(s for s in spellings if s not in longs)), dest, Form(first.form), value_type))
    return out


def _check(args: list[str]) -> None:
    ours, ours_unknown = parse_serve(args)
    theirs, unknown = parse_serve(args, upstream_declarations())
    assert unknown == [], f"vLLM 0.25.1 declares no {unknown}"
    assert ours_unknown == []
    # every typed field's setting the same, by vLLM's own dest names and value types (extraArgs pass
    # through untyped in the contract, so only their being declared is checked)
    typed = {"model", *(f.name[2:].replace("-", "_") for f in F.TYPED)}
    assert {k: v for k, v in vars(theirs).items() if k in typed} == {k: v for k, v in vars(ours).items() if k in typed}


def _example(name: str) -> AscendInferenceServiceSpec:
    return parse_resource(yaml.safe_load((EXAMPLES / name).read_text())).spec


@pytest.mark.parametrize("role", [None, Role.LEADER, Role.WORKER])
@pytest.mark.parametrize("example", ["dsv4-flash.yaml", "dsr1-2node.yaml"])
def test_example_commands_parse_with_vllms_own_flags(example: str, role: Role | None) -> None:
    spec = _example(example)
    if role is not None and spec.parallelism.nodes == 1:
        pytest.skip("single-node example")
    _check(with_role(build_engine_args(spec), spec, role))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_any_valid_spec_renders_args_vllm_parses(body: dict[str, Any]) -> None:
    spec = parse_spec(body)
    assume(not [f for f in validate_spec(spec) if f.severity is Severity.ERROR])
    _check(build_engine_args(spec))


def test_a_flag_vllm_lacks_is_caught_even_when_the_contract_has_it() -> None:
    """The point of declaring from upstream: the contract's own parser cannot see this."""
    args = ["serve", "/m", "--port", "8000"]
    _, unknown = parse_serve(args, [d for d in upstream_declarations() if d.dest != "port"])
    assert unknown == ["--port", "8000"]
