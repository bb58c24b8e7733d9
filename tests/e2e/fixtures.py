"""The e2e session fixtures: one cluster per test session, a fresh namespace per test, fake Atlas nodes.

A plugin module registered by the root conftest.py (not a conftest), so every suite that needs a cluster
(tests/e2e, tests/helm) shares the same session cluster instead of starting one each.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.cluster import (
    Cluster,
    KubectlError,
    existing_cluster,
    start_local,
    stop_local,
    wait_for,
)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The session's cluster: AIS_E2E_KUBECONFIG's if set, else a local control plane with 1 fake node.

    KUBECONFIG is exported for the session so the kubernetes client and subprocesses (the operator)
    find the same cluster. A local cluster is stopped at the end and every PID it started must be gone.
    """
    given = os.environ.get("AIS_E2E_KUBECONFIG")
    c = existing_cluster(Path(given)) if given else start_local(tmp_path_factory.mktemp("local-cluster"), nodes=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KUBECONFIG", str(c.kubeconfig))
        yield c
    if c.state_dir is not None:
        left = stop_local(c)
        assert not left, f"control-plane processes still running after down: {left}"


@pytest.fixture(scope="session")
def kubeconfig(cluster: Cluster) -> Path:
    """Path of the admin kubeconfig of the session's cluster."""
    return cluster.kubeconfig


@pytest.fixture(scope="session")
def kubectl(cluster: Cluster) -> Callable[..., str]:
    """`kubectl(*args, stdin=None, check=True)` bound to the session's kubeconfig; returns stdout."""
    return cluster.kubectl


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace (with its default ServiceAccount, so pods are admitted) deleted after the test.

    Teardown waits until the namespace has no pod left, so pods of one test never hold NPUs in the
    next, but not for the namespace itself: the namespace controller re-checks only after the pods'
    terminationGracePeriodSeconds, however fast they went, which would cost a minute per test.
    """
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    wait_for(
        lambda: cluster.kubectl("get", "serviceaccount", "default", "-n", name, check=False),
        timeout=60,
        message=f"default ServiceAccount in {name}",
    )
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")
    # The namespace controller's first pass over a namespace's contents comes ~5 s after the delete (measured
    # on the local control plane, 2026-12-05), about 45 tests' worth of CI minutes. A terminating namespace
    # admits no new pod (NamespaceLifecycle), so deleting its pods now is final, and the test's last state is
    # gone the way the namespace controller would have taken it (graceful deletes).
    cluster.kubectl("delete", "pods", "--all", "-n", name, "--wait=false", check=False)
    wait_for(
        lambda: not cluster.get_json("pods", "-n", name)["items"],
        timeout=120,
        message=f"every pod of namespace {name} deleted",
    )


@pytest.fixture
def add_nodes(cluster: Cluster) -> Iterator[Callable[[int], list[str]]]:
    """`add_nodes(n)` adds n fake Atlas 800 A2 nodes (Ready, 8 NPUs each); they are removed after the test."""
    added: list[str] = []

    def add(count: int) -> list[str]:
        names = cluster.add_nodes(count)
        added.extend(names)
        return names

    yield add
    for name in added:
        try:
            cluster.remove_node(name)
        except KubectlError as exc:
            if "NotFound" not in exc.stderr:  # the test removed it itself
                raise
