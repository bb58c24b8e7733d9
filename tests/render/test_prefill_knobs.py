"""spec.engine.longPrefillTokenThreshold and the partial-prefill pair: rendered as vLLM 0.25.1 takes them,
refused where vLLM 0.25.1 refuses to start, and explained by `aisctl plan` for the seed's 300K workload."""

from typing import Any

import pytest
import yaml

from ascend_operator.api.parse import parse_resource
from ascend_operator.render.args import build_engine_args
from ascend_operator.validation import Severity, validate_spec
from tests.cli.test_cli import aisctl
from tests.fixtures.examples import EXAMPLE


def _example(**engine: Any) -> dict[str, Any]:
    """The shipped example with these spec.engine fields; a field given as None is removed (unset)."""
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    body["spec"]["engine"].update(engine)
    for key in [k for k, v in engine.items() if v is None]:
        del body["spec"]["engine"][key]
    return body


def _errors(body: dict[str, Any]) -> list[str]:
    return [f"{f.field} {f.rule}" for f in validate_spec(parse_resource(body).spec) if f.severity is Severity.ERROR]


def test_the_threshold_renders_its_flag_and_unset_renders_nothing() -> None:
    args = build_engine_args(parse_resource(_example(longPrefillTokenThreshold=2048)).spec)
    assert args[args.index("--long-prefill-token-threshold") + 1] == "2048"
    plain = build_engine_args(parse_resource(_example(longPrefillTokenThreshold=None)).spec)
    assert not {"--long-prefill-token-threshold", "--max-num-partial-prefills"} & set(plain)


def test_a_partial_prefill_of_one_is_what_vllm_starts_with() -> None:
    spec = parse_resource(_example(maxNumPartialPrefills=1, maxLongPartialPrefills=1)).spec
    assert _errors(_example(maxNumPartialPrefills=1, maxLongPartialPrefills=1)) == []
    args = build_engine_args(spec)
    assert args[args.index("--max-num-partial-prefills") + 1] == "1"


@pytest.mark.parametrize(
    ("engine", "refused"),
    [
        ({"maxNumPartialPrefills": 2}, "spec.engine.maxNumPartialPrefills NoConcurrentPartialPrefills"),
        ({"maxLongPartialPrefills": 2}, "spec.engine.maxLongPartialPrefills NoConcurrentLongPartialPrefills"),
        (
            {"maxNumPartialPrefills": 4, "maxLongPartialPrefills": 2},
            "spec.engine.maxNumPartialPrefills NoConcurrentPartialPrefills",
        ),
    ],
)
def test_concurrent_partial_prefills_are_refused_naming_the_field(engine: dict[str, Any], refused: str) -> None:
    """vLLM 0.25.1: NotImplementedError 'Concurrent Partial Prefill is not supported' at start."""
    assert refused in _errors(_example(**engine))


def test_a_negative_threshold_is_refused_by_the_schema() -> None:
    result = aisctl("render", "-f", "-", stdin=yaml.safe_dump(_example(longPrefillTokenThreshold=-1)))
    assert result.returncode == 2
    assert "spec.engine.longPrefillTokenThreshold" in result.stderr


def test_the_shipped_example_caps_a_long_prefill_at_2048_tokens_per_step() -> None:
    """docs/benchmarking.md: on the seed's mix the threshold took short TTFT p99 from 6.6x to 1.04x their own."""
    args = build_engine_args(parse_resource(_example()).spec)
    assert args[args.index("--long-prefill-token-threshold") + 1] == "2048"


def test_plan_says_a_short_prompt_waits_for_the_whole_300k_prefill_without_the_threshold() -> None:
    result = aisctl("plan", "-f", "-", stdin=yaml.safe_dump(_example(longPrefillTokenThreshold=None)))
    assert result.returncode == 0, result.stderr
    assert "300K prompt prefills in 37 steps of 8192 tokens" in result.stdout
    assert "waits for the rest of it (up to 37 steps)" in result.stdout


def test_plan_shows_the_threshold_shares_each_step_with_short_prompts() -> None:
    result = aisctl("plan", "-f", "-", stdin=yaml.safe_dump(_example(longPrefillTokenThreshold=2048)))
    assert result.returncode == 0, result.stderr
    assert "2048 tokens per request per step: the seed's 300K prompt prefills in 147 steps (37 uncapped)" in (
        result.stdout
    )
    assert "leaving 6144 tokens of each step to others: a 2048-token prompt arriving meanwhile prefills in 1 step" in (
        result.stdout
    )


def test_plan_warns_a_threshold_below_the_draft_width_caps_speculative_decodes() -> None:
    result = aisctl("plan", "-f", "-", stdin=yaml.safe_dump(_example(longPrefillTokenThreshold=4)))
    assert "3 of 7 drafts verified per step" in result.stdout


def test_a_threshold_at_or_above_the_batch_budget_has_no_effect() -> None:
    result = aisctl("plan", "-f", "-", stdin=yaml.safe_dump(_example(longPrefillTokenThreshold=8192)))
    assert "8192 >= MBT, no effect" in result.stdout
