"""examples/dsv4-flash-long.yaml, the service for long prompts beside examples/dsv4-flash.yaml (issue 39): the
same engine but for the long-prefill threshold, so what docs/benchmarking.md measured as "a dedicated engine
for long prompts" (perf/mixed_sim.py `split`) is what a user who applies both examples gets."""

from typing import Any

import yaml

from ascend_operator.api.parse import parse_resource
from ascend_operator.render.args import build_engine_args
from ascend_operator.render.pod import Owner, build_pod, build_service
from tests.fixtures.examples import EXAMPLE

LONG = EXAMPLE.with_name("dsv4-flash-long.yaml")


def _body(path: Any) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(path.read_text())
    return body


def test_the_long_service_runs_the_examples_engine_without_the_threshold() -> None:
    short, long = parse_resource(_body(EXAMPLE)).spec, parse_resource(_body(LONG)).spec
    short_args, long_args = build_engine_args(short), build_engine_args(long)
    cut = short_args.index("--long-prefill-token-threshold")
    assert short_args[cut + 1] == "2048"
    assert long_args == short_args[:cut] + short_args[cut + 2 :]
    assert long.npus == short.npus == 8
    assert long.resources == short.resources


def test_the_long_service_has_its_own_name_and_serves_the_same_model() -> None:
    """A client picks the service by prompt length and changes only the base URL: the model name is the same."""
    short, long = _body(EXAMPLE), _body(LONG)
    assert long["metadata"]["name"] == "dsv4-flash-long" != short["metadata"]["name"]
    assert long["spec"]["model"]["servedName"] == short["spec"]["model"]["servedName"] == "deepseek-v4-flash"
    spec = parse_resource(long).spec
    owner = Owner(name="dsv4-flash-long", namespace="default")
    service = build_service(spec, owner=owner)
    assert service["metadata"]["name"] == "dsv4-flash-long"
    assert [p["port"] for p in service["spec"]["ports"]] == [8000]
    pod = build_pod(spec, owner=owner, replica=0)
    assert "--long-prefill-token-threshold" not in pod["spec"]["containers"][0]["args"]
