"""Issue 18 on a real control plane: `kubectl get ais` says why a service does not serve, and
`kubectl wait --for=condition=Available` returns once one replica serves.

The image pull failure comes from hack/kwok/pod-stages.yaml: an image on a `.invalid` registry fails to
pull with the kubelet's ErrImagePull / ImagePullBackOff, as a real node reports an unknown registry.
"""

from __future__ import annotations

import json
import re

import pytest

from harness.cluster import Cluster, KubectlError, wait_for
from tests.e2e.operator_fixtures import AddNodes, Proc, ais, condition, example, label_nodes, pods

pytestmark = pytest.mark.usefixtures("delete_services_first")

UNPULLABLE = "registry.invalid/ascend/vllm-ascend:v0.25.1rc1"
PULL_REASONS = ("ErrImagePull", "ImagePullBackOff")


def table_row(table: str) -> dict[str, str]:
    """The one row of a `kubectl get` table by column, cut at the header's column starts (cells may be blank)."""
    header, row = table.splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    ends = [*starts[1:], None]
    return {header[a:b].strip(): row[a:b].strip() for a, b in zip(starts, ends, strict=True)}


def test_an_image_that_cannot_be_pulled_shows_in_kubectl_get_ais(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc
) -> None:
    label_nodes(cluster, add_nodes(1), namespace)
    cluster.apply(example("nopull", node_label=namespace, image=UNPULLABLE), namespace=namespace)
    wait_for(
        lambda: (condition(ais(cluster, namespace, "nopull"), "Ready") or ("", ""))[1] == "ImagePullBackOff",
        timeout=90,
        message="Ready reason ImagePullBackOff",
    )
    status = ais(cluster, namespace, "nopull")["status"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert f'pod nopull-0: ImagePullBackOff: Back-off pulling image "{UNPULLABLE}"' in ready["message"]
    assert condition(ais(cluster, namespace, "nopull"), "Degraded") == ("True", "ImagePullBackOff")
    assert condition(ais(cluster, namespace, "nopull"), "Available") == ("False", "ImagePullBackOff")
    columns = table_row(cluster.kubectl("get", "ais", "nopull", "-n", namespace))
    assert (columns["STATUS"], columns["DEGRADED"]) == ("ImagePullBackOff", "ImagePullBackOff")
    assert columns["MODEL"] == "deepseek-v4-flash"
    assert pods(cluster, namespace, "nopull")[0]["status"]["phase"] == "Pending"


def test_wait_for_available_returns_with_one_of_two_replicas_serving(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, simulators: Proc
) -> None:
    label_nodes(cluster, add_nodes(1), namespace)  # room for one 8-NPU replica only
    cluster.apply(example("half", node_label=namespace, replicas=2), namespace=namespace)
    cluster.kubectl("wait", "--for=condition=Available", "ais/half", "-n", namespace, "--timeout=150s", timeout=160)
    body = ais(cluster, namespace, "half")
    assert body["status"]["readyReplicas"] == 1
    assert condition(body, "Ready") == ("False", "InsufficientNPU")
    assert condition(body, "Available") == ("True", "ReplicasServing")
    wide = cluster.kubectl("get", "ais", "half", "-n", namespace, "-o", "wide")
    assert f"http://half.{namespace}.svc:8000" in wide
    assert body["status"]["specHash"] in wide
    assert (
        pods(cluster, namespace, "half")[0]["metadata"]["annotations"]["inference.ascend.dev/spec-hash"]
        == (body["status"]["specHash"])
    )


def test_engine_pods_are_never_best_effort_and_a_drain_keeps_the_last_serving_replica(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, simulators: Proc
) -> None:
    nodes = add_nodes(1)
    label_nodes(cluster, nodes, namespace)
    cluster.apply(example("kept", node_label=namespace), namespace=namespace)
    cluster.kubectl("wait", "--for=condition=Available", "ais/kept", "-n", namespace, "--timeout=150s", timeout=160)
    pod = pods(cluster, namespace, "kept")[0]
    # The example asks requests == limits (its comment says why), so the kubelet's QoS class is
    # Guaranteed; the operator's defaults without `resources` are Burstable (tests/render/test_render_cluster.py).
    assert pod["status"]["qosClass"] == "Guaranteed"
    pdb = cluster.get_json("pdb", "kept", "-n", namespace)
    assert pdb["metadata"]["ownerReferences"][0]["uid"] == ais(cluster, namespace, "kept")["metadata"]["uid"]
    wait_for(
        lambda: (
            cluster.get_json("pdb", "kept", "-n", namespace).get("status", {}).get("disruptionsAllowed") == 0
            and cluster.get_json("pdb", "kept", "-n", namespace)["status"].get("currentHealthy") == 1
        ),
        timeout=60,
        message="the disruption controller counts the serving replica",
    )
    drain = [
        "drain", nodes[0], "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=10s",
        "--pod-selector=inference.ascend.dev/service=kept",
    ]  # fmt: skip
    with pytest.raises(KubectlError) as err:
        cluster.kubectl(*drain, timeout=60)
    assert "disruption budget" in err.value.stderr
    assert pods(cluster, namespace, "kept")[0]["metadata"]["uid"] == pod["metadata"]["uid"]
    cluster.kubectl("uncordon", nodes[0])
    off = {"spec": {"disruptionBudget": {"enabled": False}}}
    cluster.kubectl("patch", "ais", "kept", "-n", namespace, "--type=merge", "-p", json.dumps(off))
    wait_for(
        lambda: not cluster.kubectl("get", "pdb", "-n", namespace, "-o", "name").strip(),
        timeout=60,
        message="the budget removed once disabled",
    )
    assert pods(cluster, namespace, "kept")[0]["metadata"]["uid"] == pod["metadata"]["uid"]  # no roll for it


def test_a_name_no_service_can_have_is_refused_at_apply(cluster: Cluster, namespace: str, crd: None) -> None:
    with pytest.raises(KubectlError) as err:
        cluster.apply(example("dsv4.flash", node_label=namespace), namespace=namespace)
    assert "metadata.name: Invalid value: must be a DNS-1035 label" in err.value.stderr
