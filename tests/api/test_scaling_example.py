"""The HPA path docs/autoscaling.md documents targets the CRD's scale subresource as the CRD declares it.
(The KEDA example that nothing ran is gone: nothing ships that nothing ran.)"""

import re
from pathlib import Path

import yaml

from ascend_operator.api.constants import API_VERSION, KIND
from ascend_operator.crd import build_crd

DOC = Path(__file__).resolve().parents[2] / "docs" / "autoscaling.md"


def test_the_documented_hpa_target_is_the_crd_scale_subresource() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)
    target = next(yaml.safe_load(b)["scaleTargetRef"] for b in blocks if b.startswith("scaleTargetRef"))
    assert (target["apiVersion"], target["kind"]) == (API_VERSION, KIND)
    scale = build_crd()["spec"]["versions"][0]["subresources"]["scale"]
    assert scale == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }


def test_the_documented_spec_parses_with_its_stated_defaults() -> None:
    from ascend_operator.api.autoscaling import AutoscalingSpec

    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)
    documented = next(yaml.safe_load(b)["spec"]["autoscaling"] for b in blocks if "autoscaling:" in b)
    parsed = AutoscalingSpec.model_validate(documented)
    assert parsed == AutoscalingSpec(min_replicas=1, max_replicas=3)  # the values shown are the defaults
