"""Collection hooks of the e2e suite: mark its tests and honour AIS_SKIP_E2E.

Why it exists: the e2e tests are driven only by a kubeconfig so that the same suite runs here (on the
local control plane hack/local-cluster starts from binaries hack/build-k8s.sh builds) and on kind in CI
(hack/kind-e2e.sh sets AIS_E2E_KUBECONFIG). Every test under tests/e2e is marked `e2e`; they run by
default, AIS_SKIP_E2E=1 skips them deliberately.

The (slow, cached) build of the control plane is waited for by the root conftest.py before the first test
that needs it, outside the per-test timeout; starting the control plane then takes seconds and happens in
the session fixture of tests/e2e/fixtures.py (shared with tests/helm through the root conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

E2E_DIR = Path(__file__).resolve().parent


def _skip_reason() -> str | None:
    if os.environ.get("AIS_SKIP_E2E") == "1":
        return "AIS_SKIP_E2E=1"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _skip_reason()
    for item in items:
        if E2E_DIR in Path(item.path).parents:
            item.add_marker(pytest.mark.e2e)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
