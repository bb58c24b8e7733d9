"""status.selector: the pods an autoscaler counts are one per replica, so a group counts once (its leader).

The HPA's replica count is `ceil(usageRatio x pods selected)` (k8s.io/kubernetes v1.37.2
replica_calculator.go:195-223) and it writes that to spec.replicas, which counts groups: the selector
must pick exactly one pod per group. Pods here carry the labels LWS v0.7.0 puts on a group's pods
(the template's plus name, group-index and worker-index).
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

from ascend_operator.api.parse import parse_resource
from ascend_operator.render.lws import build_leader_worker_set
from ascend_operator.render.pod import Owner, build_pod, build_service, scale_selector

ROOT = Path(__file__).resolve().parents[2]


def spec_of(example: str, replicas: int) -> Any:
    body = yaml.safe_load((ROOT / "examples" / example).read_text())
    body["spec"]["replicas"] = replicas
    return parse_resource(body).spec


def matches(selector: str, labels: dict[str, str]) -> bool:
    """An equality-based label selector as the API server reads `a=b,c=d`."""
    return all(labels.get(key) == value for key, value in (term.split("=", 1) for term in selector.split(",")))


def lws_pods(lws: dict[str, Any]) -> list[dict[str, str]]:
    template = lws["spec"]["leaderWorkerTemplate"]
    out = []
    for group in range(lws["spec"]["replicas"]):
        for index in range(template["size"]):
            role = template["leaderTemplate" if index == 0 else "workerTemplate"]
            out.append({
                **role["metadata"]["labels"],
                "leaderworkerset.sigs.k8s.io/name": lws["metadata"]["name"],
                "leaderworkerset.sigs.k8s.io/group-index": str(group),
                "leaderworkerset.sigs.k8s.io/worker-index": str(index),
            })  # fmt: skip
    return out


@pytest.mark.parametrize("replicas", [1, 3])
def test_a_multi_node_service_selects_one_leader_per_group(replicas: int) -> None:
    spec, owner = spec_of("dsr1-2node.yaml", replicas), Owner(name="dsr1", namespace="llm")
    selector = scale_selector(spec, owner)
    assert selector == "inference.ascend.dev/service=dsr1,leaderworkerset.sigs.k8s.io/worker-index=0"
    pods = lws_pods(build_leader_worker_set(spec, owner=owner))
    assert len(pods) == 2 * replicas
    chosen = [p for p in pods if matches(selector, p)]
    assert len(chosen) == replicas  # the HPA's pod count is the replica count it writes
    assert {p["inference.ascend.dev/role"] for p in chosen} == {"leader"}
    # the same pods as the Service's, which serve the API and every rank's /metrics
    assert dict(term.split("=") for term in selector.split(",")) == build_service(spec, owner=owner)["spec"]["selector"]


def test_a_single_node_service_selects_every_engine_pod() -> None:
    spec, owner = spec_of("dsv4-flash.yaml", 3), Owner(name="dsv4-flash", namespace="llm")
    selector = scale_selector(spec, owner)
    assert selector == "inference.ascend.dev/service=dsv4-flash"
    pods = [build_pod(spec, owner=owner, replica=r)["metadata"]["labels"] for r in range(3)]
    assert [matches(selector, p) for p in pods] == [True, True, True]
