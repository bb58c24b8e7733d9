"""Fixtures of the kube-score tier: the kube-score and helm binaries, built (never skipped) and cached.

Why it exists: both come from hack/build-k8s.sh; the root conftest.py waits for them (or builds them) before
the first test asking for these fixtures, outside the test timeout, and a missing binary is a build, not a
silent skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helm.chart import Helm, find_helm
from tests.score.kubescore import find_kube_score


@pytest.fixture(scope="session")
def kube_score() -> Path:
    return find_kube_score()


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """helm, with its cache/config/data in a temporary directory (never the user's)."""
    return Helm(binary=find_helm(), home=tmp_path_factory.mktemp("helm-home"))
