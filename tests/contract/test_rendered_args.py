"""Rendered `vllm serve` args parsed by a parser declared from vLLM 0.25.1's own argparse definitions.

Why: a rendered command is only right if vLLM accepts it. tests/fixtures/vllm_cli.py declares its parser from
what tests/contract/upstream.py reads out of the sdist (option strings, dest, argparse form, the field's
type), so a rendered flag vLLM does not declare, or declares with another form or type, fails here even when
the engine contract has it wrong too. Here: the examples' commands (every multi-node role) and any valid spec.
"""

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings

from ascend_operator.api.parse import parse_resource, parse_spec
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.contract import flags as F
from ascend_operator.render.args import build_engine_args
from ascend_operator.render.group import Role, with_role
from ascend_operator.validation import Severity, validate_spec
from tests.fixtures.vllm_cli import parse_serve, upstream_declarations, upstream_dest
from tests.render.test_args_property import specs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _check(args: list[str]) -> None:
    parsed, unknown = parse_serve(args)
    assert unknown == [], f"vLLM 0.25.1 declares no {unknown}"
    # every typed flag the command carries is read by vLLM into the dest its contract entry names
    rendered = {F.BY_SPELLING[a].name for a in args if a in F.BY_SPELLING}
    for name in rendered & {f.name for f in F.TYPED}:
        assert getattr(parsed, upstream_dest(name)) is not None, name


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
