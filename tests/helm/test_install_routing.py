"""The chart's InferencePool rule on a real API server: granted only with routing.inferencePool.enabled.

Why it exists: the operator runs with a token of the chart's ServiceAccount (as in test_install.py) and a
service asks for an InferencePool (the GIE v1 CRD installed from upstream). With the chart value the pool
is created under exactly the chart's rules and nothing is denied; without it the API server refuses, and
the user sees InferencePoolReady=False with reason Forbidden naming the value, while the engines are
still created. The operator's metrics endpoint exports the condition the alerts read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.cluster import Cluster, wait_for
from harness.kubeconfig import token_kubeconfig
from tests.e2e.operator_fixtures import ais, routed, wait_condition
from tests.helm.chart import Helm, one
from tests.helm.operator_proc import free_port, get, local_args, running_operator
from tests.helm.test_install import _assert_clean_log, _can_i, _delete_service, _sa_name, installed

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]


@pytest.mark.parametrize("granted", [True, False], ids=["value-on", "value-off"])
def test_inference_pool_rule_follows_the_chart_value(
    helm: Helm, cluster: Cluster, namespace: str, tmp_path: Path, gie_crd: dict[str, Any], granted: bool
) -> None:
    sets = ["routing.inferencePool.enabled=true"] if granted else []
    with installed(helm, cluster, namespace, *sets) as release:
        kubeconfig = token_kubeconfig(
            cluster, service_account=_sa_name(release.manifest), namespace=namespace, path=tmp_path / "sa.kubeconfig"
        )
        can = "yes" if granted else "no"
        for verb in ("get", "create", "patch", "delete"):
            assert (
                _can_i(cluster, kubeconfig, verb, "inferencepools.inference.networking.k8s.io", "-n", namespace) == can
            )
        assert (
            _can_i(cluster, kubeconfig, "list", "inferencepools.inference.networking.k8s.io", "-n", namespace) == "no"
        )
        health, metrics = free_port(), free_port()
        args = local_args(one(release.manifest, "Deployment"), health_port=health, metrics_port=metrics)
        log = tmp_path / "operator.log"
        with running_operator(args, kubeconfig=kubeconfig, log=log, health_port=health):
            try:
                cluster.apply(routed("dsv4-flash", namespace), namespace=namespace)
                want = ("True", "Synced") if granted else ("False", "Forbidden")
                wait_condition(cluster, namespace, "dsv4-flash", "InferencePoolReady", want, timeout=90)
                pools = cluster.get_json("inferencepools", "-n", namespace)["items"]
                assert [p["metadata"]["name"] for p in pools] == (["dsv4-flash"] if granted else [])
                if not granted:
                    cond = next(
                        c
                        for c in ais(cluster, namespace, "dsv4-flash")["status"]["conditions"]
                        if c["type"] == "InferencePoolReady"
                    )
                    assert "routing.inferencePool.enabled=true" in cond["message"]
                # the engine is created either way
                assert cluster.get_json("pods", "-n", namespace, "-l", "inference.ascend.dev/service=dsv4-flash")[
                    "items"
                ]
                series = (
                    f'ascend_operator_service_condition{{condition="InferencePoolReady",namespace="{namespace}",'
                    f'reason="{want[1]}",service="dsv4-flash"}} {1.0 if granted else 0.0}'
                )
                wait_for(
                    lambda: series in get(f"http://127.0.0.1:{metrics}/metrics"),
                    timeout=30,
                    message=f"the operator exporting {series}",
                )
            finally:
                _delete_service(cluster, namespace)
        if granted:
            _assert_clean_log(log)
