"""Fixtures for the chart tests: the helm binary (built, never skipped) and the e2e suite's cluster.

Why it exists: the offline tests (lint, template, schema) need only helm, which hack/build-k8s.sh builds
and caches; a missing helm is built (the root conftest.py waits for it before the first test that asks for
the `helm` fixture, outside the test timeout) rather than silently skipping them. The install tests are marked
`e2e` and use the shared session fixtures of tests/e2e/fixtures.py (one cluster for the whole run: a
local control plane or AIS_E2E_KUBECONFIG's), and honour AIS_SKIP_E2E=1 as that suite does.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helm.chart import Helm, find_helm

HELM_DIR = Path(__file__).resolve().parent


def _ours(item: pytest.Item) -> bool:
    return HELM_DIR in Path(item.path).parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("AIS_SKIP_E2E") == "1":
        for item in items:
            if _ours(item) and item.get_closest_marker("e2e"):
                item.add_marker(pytest.mark.skip(reason="AIS_SKIP_E2E=1"))


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """helm, with its cache/config/data in a temporary directory (never the user's)."""
    return Helm(binary=find_helm(), home=tmp_path_factory.mktemp("helm-home"))
