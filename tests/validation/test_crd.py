"""The CRD is generated from the models; the checked-in copies must be exactly what the models say."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from ascend_operator.crd import NAME_VALIDATION, build_crd
from ascend_operator.validation.rules import RULES
from tests.fixtures.examples import ROOT

CRD_FILES = [
    ROOT / "crds" / "inference.ascend.dev_ascendinferenceservices.yaml",
    # the Helm chart installs its own copy (Helm only reads crds/ inside the chart); drift must fail here
    ROOT / "charts" / "ascend-inference-operator" / "crds" / "inference.ascend.dev_ascendinferenceservices.yaml",
]


@pytest.mark.parametrize("path", CRD_FILES, ids=lambda p: str(Path(p).relative_to(ROOT)))
def test_checked_in_crd_equals_the_generated_one(path: Path) -> None:
    regenerate = "run `make crd` to regenerate it from the models"
    assert path.exists(), regenerate
    assert yaml.safe_load(path.read_text()) == build_crd(), regenerate


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, child in node.items():
            found += _walk(child, f"{path}.{key}")
    elif isinstance(node, list):
        for i, child in enumerate(node):
            found += _walk(child, f"{path}[{i}]")
    return found


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_schema_is_structural() -> None:
    for path, node in _walk(_schema()):
        assert not {"$ref", "anyOf", "title"} & set(node), path
        if "properties" in node and isinstance(node.get("properties"), dict) and "type" in node:
            assert "additionalProperties" not in node, path
            assert node["type"] == "object", path
        if node.get("default", 0) is None:
            pytest.fail(f"null default at {path}")


def test_every_cel_rule_is_in_the_crd_with_its_message() -> None:
    rules = [rule for _, node in _walk(_schema()) for rule in node.get("x-kubernetes-validations", [])]
    expected = [(r.cel, r.message) for r in RULES if r.cel is not None]
    expected.append((NAME_VALIDATION["rule"], NAME_VALIDATION["message"]))
    assert sorted((r["rule"], r["message"]) for r in rules) == sorted(expected)
    # metadata.name, and every rule but the four over the free-form additionalConfig.extra map and env: 20 (1 of
    # spec.autoscaling), 10 of spec.disaggregation (validation/pd_rules.py), 2 of the partial prefills
    # (validation/prefill_rules.py), 4 of spec.autoscaling.pd (validation/autoscaling_rules.py), 1 of
    # spec.scheduling.volcano (validation/scheduling_rules.py)
    assert len(expected) == 37


@pytest.mark.parametrize("rule", ["ExtraArgsSilenceMetrics", "ExtraArgsReplaceHttpServer", "ExtraArgsBreakCanary"])
def test_kubectl_apply_refuses_flags_that_blind_the_operator_naming_extra_args(rule: str) -> None:
    """--disable-log-stats, --grpc and friends are refused by the API server on the extraArgs field."""
    engine = _schema()["properties"]["spec"]["properties"]["engine"]
    (entry,) = [v for v in engine["x-kubernetes-validations"] if v["message"] == _rule(rule).message]
    assert entry["fieldPath"] == ".extraArgs"
    assert entry["rule"].startswith("!has(self.extraArgs) || self.extraArgs.all(a, !a.matches(")


def _rule(name: str) -> Any:
    return next(r for r in RULES if r.name == name)


def test_defaults_are_the_seed_production_knobs() -> None:
    engine = _schema()["properties"]["spec"]["properties"]["engine"]["properties"]
    assert engine["maxNumBatchedTokens"]["default"] == 8192
    assert engine["maxNumSeqs"]["default"] == 32
    assert engine["gpuMemoryUtilization"]["default"] == 0.9
    assert engine["gpuMemoryUtilization"]["exclusiveMinimum"] is True
    assert engine["blockSize"]["default"] == 128
    assert engine["longContext"]["properties"]["enabled"]["default"] is False
    assert "default" not in engine["speculative"]  # an object default could never be switched off


def test_names_printer_columns_and_subresources() -> None:
    crd = build_crd()
    assert crd["metadata"]["name"] == "ascendinferenceservices.inference.ascend.dev"
    assert crd["spec"]["names"]["shortNames"] == ["ais"]
    version = crd["spec"]["versions"][0]
    assert set(version["subresources"]) == {"status", "scale"}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Ready"] == ".status.readyReplicas"
    assert columns["TP"] == ".spec.parallelism.tensor"
    assert columns["MaxLen"] == ".spec.engine.maxModelLen"
    assert {"Tok/s", "KV", "Age"} <= set(columns)
    assert columns["Model"] == ".spec.model.servedName"
    assert columns["Degraded"] == '.status.conditions[?(@.type=="Degraded")].reason'
    assert columns["Restarts"] == ".status.restarts"
    assert columns["LastRoll"] == ".status.lastRoll.time"
    wide = {c["name"] for c in version["additionalPrinterColumns"] if c.get("priority") == 1}
    assert {"Endpoint", "SpecHash"} <= wide
    assert {"Ready", "Status", "Degraded", "Model"}.isdisjoint(wide)


def test_the_schema_uses_only_keywords_a_crd_declares() -> None:
    """A pydantic Literal renders `const`, which the API server refuses in a CRD ("field not declared in
    schema"): the whole CRD would fail to install (it did once, for spec.pdRole's connector)."""
    forbidden = {"const", "$ref", "$defs", "anyOf_null", "prefixItems", "examples"}
    used = {key for _, node in _walk(_schema()) for key in node}
    assert not used & forbidden
