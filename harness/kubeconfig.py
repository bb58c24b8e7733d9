"""A kubeconfig that authenticates as a ServiceAccount only: what the chart's operator pod holds, for running the
operator locally with exactly the chart's rights (the demo, the Helm tests)."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.cluster import Cluster


def token_kubeconfig(cluster: Cluster, *, service_account: str, namespace: str, path: Path) -> Path:
    """A kubeconfig for the admin kubeconfig's cluster that authenticates with a fresh SA token only."""
    token = cluster.kubectl("create", "token", service_account, "-n", namespace, "--duration=1h").strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
    server = next(c for c in admin["clusters"] if c["name"] == context["cluster"])["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": server}],
        "users": [{"name": f"{namespace}:{service_account}", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": f"{namespace}:{service_account}"}}],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(config))
    return path
