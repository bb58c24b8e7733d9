"""The chart as Helm renders it: lint, every CI values file, pod security, the operator's args, peering.

Why it exists: a chart is judged on what it puts into the cluster. These tests read the objects `helm
template` renders and assert what an operator of the cluster would check by hand: the pod cannot gain
privileges or write its root filesystem, the arguments are ones `aisctl operator` accepts, the probes and
Services point at the ports the operator really listens on, and one replica never overlaps another.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ascend_operator.cli.main import build_parser
from tests.helm.chart import CHART, CI_VALUES, Helm, one, operator_container, pick

ids = [p.name for p in CI_VALUES]


def test_ci_values_files_cover_the_modes() -> None:
    names = {p.name for p in CI_VALUES}
    assert {"default-values.yaml", "namespaced-values.yaml", "peering-values.yaml"} <= names


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=["chart-defaults", *ids])
def test_helm_lint_strict(helm: Helm, values: Path | None) -> None:
    args = ["lint", str(CHART), "--strict"] + ([f"--values={values}"] if values else [])
    out = helm.run(*args)
    assert "1 chart(s) linted, 0 chart(s) failed" in out


@pytest.mark.parametrize("values", CI_VALUES, ids=ids)
def test_every_ci_values_file_renders_labelled_objects(helm: Helm, values: Path) -> None:
    objects = helm.template(values)
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} <= kinds
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm", obj["metadata"]["name"]
        assert labels["app.kubernetes.io/part-of"] == "ascend-inference-operator"
    # nothing of the chart's own lands outside the release namespace but per-namespace RBAC and peering
    stray = [
        (o["kind"], o["metadata"].get("namespace"))
        for o in objects
        if o["metadata"].get("namespace") not in (None, "ascend-system")
        and o["kind"] not in {"Role", "RoleBinding", "KopfPeering"}
    ]
    assert not stray


def test_pod_runs_non_root_read_only_without_privileges(helm: Helm) -> None:
    objects = helm.template()
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container = operator_container(objects)
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # the only writable path is a bounded emptyDir on /tmp
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    assert pod["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"]
    assert container["resources"]["requests"]
    assert container["resources"]["limits"]["memory"]


def test_single_replica_is_standalone_with_recreate(helm: Helm) -> None:
    objects = helm.template()
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert not any(a.startswith("--peering") for a in operator_container(objects)["args"])
    assert not pick(objects, "ClusterKopfPeering")
    assert not pick(objects, "KopfPeering")


def test_zero_replicas_installs_rbac_for_an_operator_run_elsewhere(helm: Helm) -> None:
    objects = helm.template(sets=["replicaCount=0"])
    assert one(objects, "Deployment")["spec"]["replicas"] == 0
    assert pick(objects, "ServiceAccount")
    assert pick(objects, "ClusterRole")
    assert not pick(objects, "ClusterKopfPeering")


def test_chart_args_are_ones_aisctl_operator_accepts(helm: Helm) -> None:
    for values in CI_VALUES:
        container = operator_container(helm.template(values))
        args = build_parser().parse_args(container["args"])  # exits (SystemExit) on an unknown flag
        assert args.command == "operator"
        chart_values = yaml.safe_load(values.read_text()) or {}
        watched = chart_values.get("operator", {}).get("watchNamespaces", [])
        assert args.namespace == watched, values.name


def test_probe_and_metrics_service_point_at_the_ports_the_operator_listens_on(helm: Helm) -> None:
    objects = helm.template(sets=["operator.healthPort=8181", "metrics.port=9191"])
    container = operator_container(objects)
    args = build_parser().parse_args(container["args"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 8181, "metrics": 9191}
    assert args.liveness == "http://0.0.0.0:8181/healthz"
    assert args.metrics_port == 9191
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    service = one(objects, "Service")
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9191, "targetPort": "metrics", "protocol": "TCP"}]
    pod_labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_metrics_disabled_means_no_port_no_flag_no_service(helm: Helm) -> None:
    objects = helm.template(sets=["metrics.enabled=false"])
    container = operator_container(objects)
    assert build_parser().parse_args(container["args"]).metrics_port is None
    assert [p["name"] for p in container["ports"]] == ["health"]
    assert not pick(objects, "Service")
    assert not pick(objects, "ServiceMonitor")


def test_image_defaults_to_app_version_and_prefers_a_digest(helm: Helm) -> None:
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert operator_container(helm.template())["image"] == f"ascend-inference-operator:{app_version}"
    digest = "sha256:" + "ab" * 32
    pinned = operator_container(helm.template(sets=[f"image.digest={digest}", "image.repository=r/op"]))
    assert pinned["image"] == f"r/op@{digest}"


def test_chart_declares_kube_version_and_app_version_matches_the_package() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"].startswith(">=1.30")
    pyproject = (CHART.parents[1] / "pyproject.toml").read_text()
    assert f'version = "{chart["appVersion"]}"' in pyproject
