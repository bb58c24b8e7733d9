"""The chart on a real API server: install, serve the CRD, run the flow under its RBAC, uninstall safely.

Why it exists: RBAC rules read fine and still fail at the first forbidden call. Here the operator runs
with a TokenRequest token of the chart's ServiceAccount and the chart's own arguments, reconciles
examples/dsv4-flash.yaml into its pod and Service, and then the same token is shown unable to do what it
must not: read Secrets, or touch a namespace outside its scope. Uninstalling must leave the CRD and the
user's AscendInferenceServices alone.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ascend_operator.api.constants import LABEL_SERVICE
from ascend_operator.render.probes import READINESS_GATE
from harness.cluster import Cluster, KubectlError, wait_for
from harness.kubeconfig import token_kubeconfig
from tests.helm.chart import CHART, ROOT, Helm, one, parse_manifest
from tests.helm.operator_proc import free_port, get, local_args, running_operator

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

CRD = "ascendinferenceservices.inference.ascend.dev"
EXAMPLE = ROOT / "examples" / "dsv4-flash.yaml"
# kopf logs "Not enough permissions ..." and KubeApi "403 Forbidden: ..."; a bare "403" would match timestamps
FORBIDDEN_MARKS = ("Forbidden", "forbidden", "Not enough permissions")


@dataclass(frozen=True)
class Release:
    """An installed release: what Helm installed and the NOTES it printed."""

    manifest: list[dict[str, Any]]
    notes: str


@contextmanager
def installed(helm: Helm, cluster: Cluster, namespace: str, *sets: str) -> Iterator[Release]:
    """`helm install` a uniquely named release; yields it; uninstalls at the end."""
    release = f"ais-{uuid.uuid4().hex[:6]}"
    bound = helm.bound(cluster.kubeconfig)
    bound.run("install", release, str(CHART), f"--namespace={namespace}", *(f"--set={s}" for s in sets))
    try:
        yield Release(
            manifest=parse_manifest(bound.run("get", "manifest", release, f"--namespace={namespace}")),
            notes=bound.run("get", "notes", release, f"--namespace={namespace}"),
        )
    finally:
        bound.run("uninstall", release, f"--namespace={namespace}", "--wait")


def _can_i(cluster: Cluster, kubeconfig: Path, *args: str) -> str:
    cmd = [cluster.kubectl_bin, f"--kubeconfig={kubeconfig}", "auth", "can-i", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    return res.stdout.strip()


def _as_token(cluster: Cluster, kubeconfig: Path, *args: str) -> KubectlError | None:
    """Run kubectl with the token's kubeconfig; the error if it failed."""
    token_cluster = Cluster(kubeconfig=kubeconfig, kubectl_bin=cluster.kubectl_bin)
    try:
        token_cluster.kubectl(*args)
    except KubectlError as exc:
        return exc
    return None


def _sa_name(manifest: list[dict[str, Any]]) -> str:
    name: str = one(manifest, "ServiceAccount")["metadata"]["name"]
    return name


def _flow(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """Apply the example; wait for the operator's pod, Service and status; return the service."""
    cluster.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))
    selector = f"{LABEL_SERVICE}=dsv4-flash"
    wait_for(
        lambda: cluster.get_json("pods", "-n", namespace, "-l", selector)["items"],
        timeout=90,
        message="the operator's engine pod",
    )
    wait_for(
        lambda: cluster.get_json("service", "dsv4-flash", "-n", namespace),
        timeout=60,
        message="the operator's Service",
    )
    # the health loop's readiness gate (pods/status patch): the engine has no /metrics here, so "not ready"
    wait_for(
        lambda: any(
            c["type"] == READINESS_GATE
            for p in cluster.get_json("pods", "-n", namespace, "-l", selector)["items"]
            for c in p["status"].get("conditions", [])
        ),
        timeout=90,
        message=f"the operator's {READINESS_GATE} condition on the engine pod",
    )
    service: dict[str, Any] = wait_for(
        lambda: (
            (ais := cluster.get_json("ais", "dsv4-flash", "-n", namespace)).get("status", {}).get("conditions") and ais
        ),
        timeout=60,
        message="the status the operator patches",
    )
    return service


def _delete_service(cluster: Cluster, namespace: str) -> None:
    """Delete the example while the operator still runs, so its finalizer is removed."""
    cluster.kubectl("delete", "ais", "dsv4-flash", "-n", namespace, "--wait=true", "--timeout=90s")


def _assert_clean_log(log: Path) -> None:
    text = log.read_text()
    bad = [line for line in text.splitlines() if any(mark in line for mark in FORBIDDEN_MARKS)]
    assert not bad, "the operator hit RBAC denials:\n" + "\n".join(bad[:20])


def test_install_serves_the_crd(helm: Helm, cluster: Cluster, namespace: str) -> None:
    with installed(helm, cluster, namespace) as release:
        manifest = release.manifest
        assert "kubectl apply -f examples/dsv4-flash.yaml" in release.notes
        assert "kubectl get ais" in release.notes
        crd = cluster.get_json("crd", CRD)
        established = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert established["Established"] == "True"
        assert established["NamesAccepted"] == "True"
        resources = cluster.kubectl("api-resources", "--api-group=inference.ascend.dev", "-o", "name").split()
        assert resources == [CRD]
        assert cluster.get_json("ais", "-n", namespace)["items"] == []
        assert cluster.get_json("deployment", one(manifest, "Deployment")["metadata"]["name"], "-n", namespace)
        assert cluster.get_json("serviceaccount", _sa_name(manifest), "-n", namespace)


def test_cluster_wide_token_runs_the_flow_and_cannot_read_secrets(
    helm: Helm, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    # two replicas: the chart turns kopf peering on, so the peering RBAC is exercised too
    with installed(helm, cluster, namespace, "replicaCount=2") as release:
        manifest = release.manifest
        kubeconfig = token_kubeconfig(
            cluster, service_account=_sa_name(manifest), namespace=namespace, path=tmp_path / "sa.kubeconfig"
        )
        health, metrics = free_port(), free_port()
        args = local_args(one(manifest, "Deployment"), health_port=health, metrics_port=metrics)
        assert any(a.startswith("--peering=") for a in args)
        log = tmp_path / "operator.log"
        with running_operator(args, kubeconfig=kubeconfig, log=log, health_port=health):
            try:
                ais = _flow(cluster, namespace)
                assert ais["metadata"]["finalizers"] == ["inference.ascend.dev/finalizer"]
                assert "ascend_operator_rolls" in get(f"http://127.0.0.1:{metrics}/metrics")
                peering = cluster.get_json(
                    "clusterkopfpeering", one(manifest, "ClusterKopfPeering")["metadata"]["name"]
                )
                assert peering.get("status"), "the operator's peering heartbeat was not written"
            finally:
                _delete_service(cluster, namespace)
        _assert_clean_log(log)

        assert _can_i(cluster, kubeconfig, "get", "secrets", "--all-namespaces") == "no"
        assert _can_i(cluster, kubeconfig, "list", "secrets", "-n", namespace) == "no"
        assert _can_i(cluster, kubeconfig, "list", "configmaps", "-n", namespace) == "no"
        assert _can_i(cluster, kubeconfig, "delete", "services", "-n", namespace) == "no"
        assert _can_i(cluster, kubeconfig, "update", "ascendinferenceservices", "-n", namespace) == "no"
        assert _can_i(cluster, kubeconfig, "create", "pods", "-n", "default") == "yes"
        denied = _as_token(cluster, kubeconfig, "get", "secrets", "-n", namespace)
        assert denied is not None
        assert "forbidden" in denied.stderr.lower()


def test_namespaced_token_runs_the_flow_and_cannot_touch_other_namespaces(
    helm: Helm, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    other = f"other-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", other)
    try:
        with installed(helm, cluster, namespace, f"operator.watchNamespaces={{{namespace}}}") as release:
            manifest = release.manifest
            assert f"kubectl apply -n {namespace} -f examples/dsv4-flash.yaml" in release.notes
            kubeconfig = token_kubeconfig(
                cluster, service_account=_sa_name(manifest), namespace=namespace, path=tmp_path / "sa.kubeconfig"
            )
            health = free_port()
            args = local_args(one(manifest, "Deployment"), health_port=health, metrics_port=free_port())
            assert f"--namespace={namespace}" in args
            log = tmp_path / "operator.log"
            with running_operator(args, kubeconfig=kubeconfig, log=log, health_port=health):
                try:
                    _flow(cluster, namespace)
                finally:
                    _delete_service(cluster, namespace)
            _assert_clean_log(log)

            for verb, resource in (("list", "pods"), ("create", "pods"), ("list", "ascendinferenceservices")):
                assert _can_i(cluster, kubeconfig, verb, resource, "-n", other) == "no", (verb, resource)
                assert _can_i(cluster, kubeconfig, verb, resource, "-n", namespace) == "yes", (verb, resource)
            assert _can_i(cluster, kubeconfig, "get", "secrets", "-n", namespace) == "no"
            denied = _as_token(cluster, kubeconfig, "get", "pods", "-n", other)
            assert denied is not None
            assert "forbidden" in denied.stderr.lower()
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "intruder", "namespace": other},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            }
            refused = Cluster(kubeconfig=kubeconfig, kubectl_bin=cluster.kubectl_bin)
            with pytest.raises(KubectlError, match=r"(?i)forbidden"):
                refused.kubectl("create", "-f", "-", stdin=json.dumps(pod))
    finally:
        cluster.kubectl("delete", "namespace", other, "--wait=true", "--timeout=120s")


def test_uninstall_keeps_the_crd_and_the_users_services(helm: Helm, cluster: Cluster, namespace: str) -> None:
    with installed(helm, cluster, namespace) as release:
        manifest = release.manifest
        cluster.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))
        cluster_role = _sa_name(manifest)  # the operator's own ClusterRole is named like its ServiceAccount
    # the release is gone (installed() uninstalled it) ...
    with pytest.raises(KubectlError, match="NotFound"):
        cluster.kubectl("get", "clusterrole", cluster_role)
    with pytest.raises(KubectlError, match="NotFound"):
        cluster.kubectl("get", "serviceaccount", _sa_name(manifest), "-n", namespace)
    # ... and what users own is not
    assert cluster.get_json("crd", CRD)["metadata"]["name"] == CRD
    ais = cluster.get_json("ais", "dsv4-flash", "-n", namespace)
    assert ais["spec"]["replicas"] == 1
    cluster.kubectl("delete", "ais", "dsv4-flash", "-n", namespace, "--wait=true", "--timeout=60s")
