"""The real-engine tier: the operator on the local control plane with vLLM 0.25.1 on CPU as its engines.

Every test needs the real engine's install (the `real_vllm` fixture: hack/real-vllm.sh, waited for like the Go
tools by the root conftest.py); those that also run on the cluster are `e2e` (AIS_SKIP_E2E=1 skips them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import _skip_reason

REAL_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _skip_reason()
    for item in items:
        if REAL_DIR in Path(item.path).parents and "cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
