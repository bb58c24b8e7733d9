"""Property: any valid spec renders args that vLLM's own parser reads back to the spec's settings.

The expectation is not computed by the renderer: the parser is vLLM 0.25.1's (tests/fixtures/vllm_cli.py,
declared from the sdist), each setting is read under the dest vLLM gives the flag, and its value comes from
the raw spec body with the CRD's defaults applied (what the API server stores), keys snake-cased for JSON
flags. The contract entry says which field a flag carries and how a bool is spelled; adding a typed flag
adds it to this expectation without editing this file. The seed's own command line is the hand-written
oracle for the production profile (tests/render/test_seed_profile.py).
"""

import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ascend_operator.api.parse import parse_spec
from ascend_operator.contract import flags as F
from ascend_operator.contract.flags import Form
from ascend_operator.render.args import build_engine_args
from ascend_operator.validation import Severity, validate_spec
from tests.fixtures import openapi_check
from tests.fixtures.vllm_cli import parse_serve, upstream_dest

CRD = Path(__file__).resolve().parents[2] / "crds" / "inference.ascend.dev_ascendinferenceservices.yaml"
SCHEMA = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]

names = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)
layouts = st.sampled_from([(8, 1, 8), (4, 2, 8), (2, 4, 8), (1, 1, 1), (2, 1, 2), (4, 1, 4)])


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    tensor, data, npus = draw(layouts)
    engine: dict[str, Any] = {
        "port": draw(st.integers(1024, 65535)),
        "maxNumSeqs": draw(st.integers(1, 256)),
        "maxNumBatchedTokens": draw(st.integers(256, 65536)),
        "gpuMemoryUtilization": draw(st.floats(0.05, 1.0, allow_nan=False)),
        "blockSize": draw(st.sampled_from([16, 64, 128, 256])),
        "enableAutoToolChoice": draw(st.booleans()),
        "enablePromptTokensDetails": draw(st.booleans()),
        "asyncScheduling": draw(st.booleans()),
    }
    optional = {
        "maxModelLen": st.integers(1024, 1_048_576),
        "tokenizerMode": names,
        "toolCallParser": names,
        "reasoningParser": names,
        "hybridKvCacheManager": st.booleans(),
        "modelLoader": st.fixed_dictionaries(
            {"enableMultithreadLoad": st.booleans(), "numThreads": st.integers(1, 256)}
        ),
        "speculative": st.fixed_dictionaries(
            {
                "method": st.sampled_from(["dspark", "mtp", "eagle3"]),
                "numSpeculativeTokens": st.integers(1, 8),
            },
            optional={"enforceEager": st.booleans()},
        ),
        "compilation": st.fixed_dictionaries(
            {"cudagraphMode": st.sampled_from(["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY"])}
        ),
        "additionalConfig": st.fixed_dictionaries(
            {},
            optional={
                "enableSharedExpertDp": st.booleans(),
                "multistreamOverlapSharedExpert": st.booleans(),
                "extra": st.dictionaries(names.map(lambda n: "x_" + n), st.integers(0, 9), max_size=2),
            },
        ),
        "longContext": st.fixed_dictionaries({"enabled": st.booleans()}),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            engine[key] = draw(strategy)
    return {
        "image": "img",
        "npus": npus,
        "parallelism": {"tensor": tensor, "data": data, "expert": draw(st.booleans())},
        "model": {
            "path": "/models/" + draw(names),
            "servedName": draw(names),
            "quantization": draw(st.none() | st.just("ascend")),
            "source": {"hostPath": {"path": "/data/m"}},
        },
        "engine": engine,
    }


def _snake(key: str) -> str:
    return re.sub(r"([A-Z])", r"_\1", key).lower()


def _raw(body: dict[str, Any], path: str) -> Any:
    """The stored body's value at a contract field path (attribute names), looked up by its wire name."""
    node: Any = body
    for step in path.split("."):
        wire = re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), step)
        node = node.get(wire) if isinstance(node, dict) else None
    return node


def _expected_value(stored: dict[str, Any], flag: F.Flag) -> Any:
    value = flag.fixed if flag.field is None else _raw(stored, flag.field)
    if value is None:
        return None
    if flag.form is Form.BOOL:
        on = value != flag.negated
        return True if on else (False if flag.says_false else None)
    if flag.form is Form.JSON:
        assert isinstance(value, dict), (flag, value)
        obj = {_snake(k): v for k, v in value.items() if v is not None and k != flag.merged}
        obj.update({k: True for switch, keys in flag.switched if _raw(stored, switch) for k in keys})
        obj.update(value.get(flag.merged, {}) if flag.merged else {})
        return obj or None
    return value


def _expected(body: dict[str, Any]) -> dict[str, Any]:
    """vLLM dest -> setting, for every contract entry a spec renders."""
    stored = openapi_check.with_defaults(SCHEMA, body)
    rendered = [f for f in F.TYPED if f.field is not None or f.fixed is not None]
    return {upstream_dest(f.name): _expected_value(stored, f) for f in rendered}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_rendered_args_parse_back_to_the_spec(body: dict[str, Any]) -> None:
    spec = parse_spec(body)
    assume(not [f for f in validate_spec(spec) if f.severity is Severity.ERROR])
    parsed, unknown = parse_serve(build_engine_args(spec))
    assert unknown == []
    expected = _expected(body)
    assert {k: v for k, v in vars(parsed).items() if k in expected} == expected
    # No other vLLM option is set by the renderer.
    assert {k: v for k, v in vars(parsed).items() if k not in expected and v is not None} == {}
