"""The HPA example (examples/hpa-dsv4-flash.yaml, run on the local control plane by
tests/e2e/test_autoscaling.py) targets the CRD's scale subresource as the CRD declares it, and the service of
examples/dsv4-flash.yaml by name; docs/autoscaling.md's spec.autoscaling block parses with its stated defaults.
(The KEDA example that nothing ran is gone: nothing ships that nothing ran.)"""

import re
from pathlib import Path

import yaml

from ascend_operator.api.constants import API_VERSION, KIND
from ascend_operator.crd import build_crd

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "autoscaling.md"
HPA = ROOT / "examples" / "hpa-dsv4-flash.yaml"


def test_the_hpa_example_targets_the_example_service_through_the_crd_scale_subresource() -> None:
    hpa = yaml.safe_load(HPA.read_text())
    service = yaml.safe_load((ROOT / "examples" / "dsv4-flash.yaml").read_text())
    assert (hpa["apiVersion"], hpa["kind"]) == ("autoscaling/v2", "HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == (API_VERSION, KIND, service["metadata"]["name"])
    assert "autoscaling" not in service["spec"]  # one or the other: with both the operator holds
    assert hpa["spec"]["minReplicas"] <= service["spec"]["replicas"] <= hpa["spec"]["maxReplicas"]
    scale = build_crd()["spec"]["versions"][0]["subresources"]["scale"]
    assert scale == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    assert "examples/hpa-dsv4-flash.yaml" in DOC.read_text()


def test_the_documented_spec_parses_with_its_stated_defaults() -> None:
    from ascend_operator.api.autoscaling import AutoscalingSpec

    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)
    documented = next(yaml.safe_load(b)["spec"]["autoscaling"] for b in blocks if "autoscaling:" in b)
    parsed = AutoscalingSpec.model_validate(documented)
    assert parsed == AutoscalingSpec(min_replicas=1, max_replicas=3)  # the values shown are the defaults
