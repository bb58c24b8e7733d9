"""perf/mixed_sim.py's layouts start the engines docs/benchmarking.md says they do: the example's rendered args
for the short requests, examples/dsv4-flash-long.yaml's for a dedicated long engine, overrides on both."""

from pathlib import Path
from typing import Any

from perf.mixed_sim import EXAMPLE, EXAMPLE_LONG, engine_argv, layout

FLAG = "--long-prefill-token-threshold"


def _argv(fields: dict[str, Any], example: Path = EXAMPLE) -> list[str]:
    return engine_argv(fields, scale=10.0, acceptance="real", extra=[], example=example)


def test_the_short_engine_has_the_shipped_threshold_and_the_long_engine_none() -> None:
    short = _argv({})
    assert short[short.index(FLAG) + 1] == "2048"
    assert FLAG not in _argv({}, EXAMPLE_LONG)


def test_a_layouts_overrides_reach_both_of_its_engines() -> None:
    kind, fields = layout("split:longPrefillTokenThreshold=512,maxNumSeqs=16")
    assert kind == "split"
    assert fields == {"longPrefillTokenThreshold": 512, "maxNumSeqs": 16}
    for example in (EXAMPLE, EXAMPLE_LONG):
        argv = _argv(fields, example)
        assert argv[argv.index(FLAG) + 1] == "512"
        assert argv[argv.index("--max-num-seqs") + 1] == "16"
    assert FLAG not in _argv(layout("agg:longPrefillTokenThreshold=unset")[1])
