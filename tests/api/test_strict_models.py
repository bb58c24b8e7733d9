"""`aisctl render` refuses what `kubectl apply` refuses: random mutations of the examples, both ways.

Why: 300 mutations of the example once gave renders for `engine.port: "128"` and a nodeSelector value with
a newline, both refused by the API server at apply. Here every mutation (a field set to a value of another
type or an odd string, removed, or an unknown field added) goes to the models (`parse_spec`, what aisctl and
the operator run first) and to the generated CRD's structural schema (tests/fixtures/openapi_check.py, the API
server's own checks before CEL), and the two must agree on accept or refuse.
"""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ascend_operator.api.parse import SpecError, parse_spec
from tests.fixtures import openapi_check

ROOT = Path(__file__).resolve().parents[2]
SPECS = [yaml.safe_load((ROOT / "examples" / n).read_text())["spec"] for n in ("dsv4-flash.yaml", "dsr1-2node.yaml")]
#: the checked-in CRD, what `kubectl apply` installs (tests/validation/test_crd.py holds it equal to the models')
CRD = yaml.safe_load((ROOT / "crds" / "inference.ascend.dev_ascendinferenceservices.yaml").read_text())
SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]

Path_ = tuple[str, ...]


def _paths(schema: dict[str, Any], prefix: Path_ = ()) -> list[Path_]:
    """Every field path the schema declares; a map's values as key `k`, a list's items as `[0]`."""
    out: list[Path_] = []
    for name, child in schema.get("properties", {}).items():
        out.append((*prefix, name))
        out += _paths(child, (*prefix, name))
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and "type" in extra:
        out.append((*prefix, "k"))
        out += _paths(extra, (*prefix, "k"))
    items = schema.get("items")
    if isinstance(items, dict) and items.get("type") == "object":
        out += _paths(items, (*prefix, "[0]"))
    return out


PATHS = _paths(SCHEMA)

odd_values = st.one_of(
    st.sampled_from(["128", "true", "0.5", "", " ", "a\nb", "ünïcødé", "x" * 70, "UPPER", "-lead", "ok-1.v_2"]),
    st.sampled_from(["quay.io/ascend/vllm-ascend:v1", "img@sha256:" + "a" * 64, "localhost:5000/a/b", "Img"]),
    st.sampled_from(["/models/m", "FULL", "dspark", "ClusterIP", "1Gi", "eth0", "HostMounts"]),
    st.integers(-2, 70_000),
    st.booleans(),
    st.sampled_from([0.5, 1.5, 0.95, -0.25]),  # integral floats (1.0) are integers to the API server's decoder
    st.sampled_from([[], ["x"], [1], {}, {"k": "v"}, {"k": 1}]),
)


def _parent(body: dict[str, Any], path: Path_) -> dict[str, Any] | None:
    """The object holding the last element of `path`, made on the way (None where a non-object blocks it)."""
    node: Any = body
    for i, step in enumerate(path[:-1]):
        if step == "[0]":
            if not isinstance(node, list):
                return None
            if not node:
                node.append({})
            node = node[0]
        elif isinstance(node, dict):
            node = node.setdefault(step, [] if path[i + 1] == "[0]" else {})
        else:
            return None
    return node if isinstance(node, dict) else None


@st.composite
def mutated_specs(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(draw(st.sampled_from(SPECS)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        if path[-1] == "[0]":
            continue
        parent = _parent(body, path)
        if parent is None:
            continue
        match draw(st.sampled_from(["set", "set", "set", "remove", "unknown"])):
            case "set":
                parent[path[-1]] = draw(odd_values)
            case "remove":
                parent.pop(path[-1], None)
            case _:
                parent[path[-1] + "Typo"] = draw(odd_values)
    return body


def _models_refuse(body: dict[str, Any]) -> str | None:
    try:
        parse_spec(body)
    except SpecError as exc:
        return str(exc)
    return None


def _schema_refuses(body: dict[str, Any]) -> list[str]:
    return openapi_check.errors(SCHEMA, openapi_check.with_defaults(SCHEMA, body))


def _set(path: str, value: Any) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(SPECS[0])
    *head, last = path.split(".")
    parent = _parent(body, (*head, last))
    assert parent is not None
    parent[last] = value
    return body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_specs())
@example(_set("engine.port", "128"))
@example(_set("engine.speculative.numSpeculativeTokens", True))
@example(_set("scheduling.nodeSelector.k", "a\nb"))
@example(_set("image", "ünïcødé"))
def test_models_and_crd_schema_agree_on_random_mutations(body: dict[str, Any]) -> None:
    models, crd = _models_refuse(body), _schema_refuses(body)
    assert (models is None) == (not crd), f"models: {models or 'accept'}; CRD schema: {crd or 'accept'}"


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("engine.port", "128", 'spec.engine.port: Input should be a valid integer, got "128"'),
        ("engine.speculative.numSpeculativeTokens", True, "spec.engine.speculative.numSpeculativeTokens"),
        ("engine.enablePromptTokensDetails", "true", "spec.engine.enablePromptTokensDetails"),
        ("engine.gpuMemoryUtilization", "0.9", "spec.engine.gpuMemoryUtilization"),
        ("scheduling.nodeSelector.zone", "a\nb", "spec.scheduling.nodeSelector.zone: must be a Kubernetes label"),
        ("podMetadata.labels.team", "-x", "spec.podMetadata.labels.team: must be a Kubernetes label value"),
        ("image", "ünïcødé", "spec.image: must be an image reference"),
        ("image", "quay.io/Ascend/vllm", "spec.image: must be an image reference"),
    ],
)
def test_render_refuses_what_apply_refuses_naming_the_field_and_rule(path: str, value: Any, named: str) -> None:
    body = _set(path, value)
    assert _schema_refuses(body), "the CRD accepts it: then the models should too"
    refused = _models_refuse(body)
    assert refused is not None
    assert named in refused


def test_a_json_integer_is_a_number() -> None:
    body = _set("engine.gpuMemoryUtilization", 1)
    assert _models_refuse(body) is None
    assert parse_spec(body).engine.gpu_memory_utilization == 1.0
    assert not _schema_refuses(body)
