"""examples/keda-scaledobject.yaml targets the CRD's scale subresource with a metric vLLM really exports."""

import re
from pathlib import Path

import yaml

from ascend_operator.api.constants import API_VERSION, KIND
from ascend_operator.crd import build_crd

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "keda-scaledobject.yaml"


def test_keda_example_scales_an_ais_on_the_waiting_queue() -> None:
    body = yaml.safe_load(EXAMPLE.read_text())
    target = body["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"]) == (API_VERSION, KIND)
    (trigger,) = body["spec"]["triggers"]
    # the gauge the operator itself parses from the engines (health/samples.py)
    assert re.search(r"\bvllm:num_requests_waiting\{", trigger["metadata"]["query"])
    scale = build_crd()["spec"]["versions"][0]["subresources"]["scale"]
    assert scale == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
