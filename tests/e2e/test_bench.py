"""`aisctl bench --service`: through the kubeconfig, every engine pod of an AIS is measured, and the result
names the spec hash that was measured and whether every pod runs it.

The Service's cluster IP has no proxy behind it on the local control plane, so the run uses --pods-only;
the Service URL itself is covered by tests/bench/test_bench_targets.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ascend_operator.api.constants import ANNOTATION_SPEC_HASH
from ascend_operator.cli.main import main
from harness.cluster import Cluster
from tests.e2e.operator_fixtures import AddNodes, Proc, pods, ready_service

pytestmark = pytest.mark.usefixtures("delete_services_first")


def test_bench_service_measures_each_engine_pod_with_its_spec_hash(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    operator: Proc,
    attach: Callable[..., Proc],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ready_service(cluster, namespace, add_nodes, attach, replicas=2)
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    out = tmp_path / "bench"
    code = main(
        [
            "bench", "sweep", "--service", "svc", "-n", namespace, "--pods-only", "--concurrency", "2",
            "--rounds", "1", "--input-tokens", "256", "--output-tokens", "64", "--out", str(out), "--no-progress",
        ]
    )  # fmt: skip
    result = json.loads((out / "result.json").read_text())
    assert (code, result["verdict"]) == (0, "PASS")
    names = sorted(p["metadata"]["name"] for p in pods(cluster, namespace, "svc"))
    assert sorted(result["endpoints"]) == names
    assert sorted(p["endpoint"] for p in result["points"]) == names
    digest = {p["metadata"]["annotations"][ANNOTATION_SPEC_HASH] for p in pods(cluster, namespace, "svc")}
    assert result["ais"]["spec_hash"] in digest
    assert result["ais"]["pods_at_spec_hash"] is True
    for endpoint in result["endpoints"].values():
        assert endpoint["models"] == ["deepseek-v4-flash"]
        assert endpoint["clock"] == "aissim"
