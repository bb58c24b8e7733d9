"""The chart's LeaderWorkerSet rule on a real API server: a two-node service under the chart's identity.

Why it exists: with `multiNode.enabled=true` the operator, running with a token of the chart's
ServiceAccount and the Deployment's own arguments (as in test_install_routing.py), must create the
service's LeaderWorkerSet, read the group's pods and write the per-group status with exactly the
chart's rules: any RBAC denial shows in its log. Without the value the rule is not there at all. LWS
itself (controller, CRD, webhooks) is the session cluster's, as in tests/e2e/test_multinode.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.cluster import Cluster, wait_for
from harness.kubeconfig import token_kubeconfig
from tests.e2e.operator_fixtures import ais, label_nodes
from tests.e2e.test_multinode import by_role, group_pods, two_node
from tests.helm.chart import Helm, one
from tests.helm.operator_proc import free_port, local_args, running_operator
from tests.helm.test_install import _assert_clean_log, _can_i, _sa_name, installed

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420), pytest.mark.usefixtures("delete_services_first")]

LWS_RESOURCE = "leaderworkersets.leaderworkerset.x-k8s.io"
VERBS = ("get", "create", "patch", "delete")


def test_without_the_value_the_operator_may_not_touch_leaderworkersets(
    helm: Helm, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    with installed(helm, cluster, namespace) as release:
        kubeconfig = token_kubeconfig(
            cluster, service_account=_sa_name(release.manifest), namespace=namespace, path=tmp_path / "sa.kubeconfig"
        )
        assert [_can_i(cluster, kubeconfig, verb, LWS_RESOURCE, "-n", namespace) for verb in VERBS] == ["no"] * 4


def test_a_two_node_service_runs_under_the_chart_rules_without_a_denial(
    helm: Helm,
    cluster: Cluster,
    namespace: str,
    tmp_path: Path,
    add_nodes: Callable[[int], list[str]],
    lws: None,
) -> None:
    label_nodes(cluster, add_nodes(2), namespace)
    with installed(helm, cluster, namespace, "multiNode.enabled=true") as release:
        kubeconfig = token_kubeconfig(
            cluster, service_account=_sa_name(release.manifest), namespace=namespace, path=tmp_path / "sa.kubeconfig"
        )
        assert [_can_i(cluster, kubeconfig, verb, LWS_RESOURCE, "-n", namespace) for verb in VERBS] == ["yes"] * 4
        assert _can_i(cluster, kubeconfig, "list", LWS_RESOURCE, "-n", namespace) == "no"
        health, metrics = free_port(), free_port()
        args = local_args(one(release.manifest, "Deployment"), health_port=health, metrics_port=metrics)
        log = tmp_path / "operator.log"
        with running_operator(args, kubeconfig=kubeconfig, log=log, health_port=health):
            try:
                cluster.apply(two_node("svc", namespace), namespace=namespace)
                sets = wait_for(
                    lambda: cluster.get_json("leaderworkersets", "-n", namespace)["items"],
                    timeout=90,
                    message="the operator's LeaderWorkerSet",
                )
                assert [s["metadata"]["name"] for s in sets] == ["svc-group"]
                wait_for(lambda: len(group_pods(cluster, namespace)) == 2, timeout=90, message="the group's pods")
                roles = by_role(group_pods(cluster, namespace))
                want: dict[str, Any] = {"index": 0, "leader": "svc-group-0", "pods": "2/2"}
                wait_for(
                    lambda: (
                        [{k: g[k] for k in want} for g in ais(cluster, namespace, "svc")["status"].get("groups") or []]
                        == [want]
                    ),
                    timeout=60,
                    message="status.groups written by the operator",
                )
                assert roles["leader"]["spec"]["nodeName"] != roles["worker"]["spec"]["nodeName"]
            finally:
                cluster.kubectl("delete", "ais", "svc", "-n", namespace, "--wait=true", "--timeout=90s")
        _assert_clean_log(log)
