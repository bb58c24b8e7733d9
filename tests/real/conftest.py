"""The real-engine tier: the operator on the local control plane with vLLM 0.25.1 on CPU as its engines.

Every test needs the real engine's install (the `real_vllm` fixture: hack/real-vllm.sh, waited for like the Go
tools by the root conftest.py); those that also run on the cluster are `e2e` (AIS_SKIP_E2E=1 skips them).
"""

from __future__ import annotations

from collections.abc import Generator
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


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Each phase's report on the item (`item.rep_call`), so a fixture's teardown can tell a failed test."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def failed(node: pytest.Item) -> bool:
    """Whether the test's call phase failed (set by the hook above)."""
    report = getattr(node, "rep_call", None)
    return report is not None and report.failed


def log_tails(directory: Path, *, lines: int = 25) -> str:
    """The last lines of every log under `directory`: the engines' own words on a failed real-engine test."""
    parts = []
    for log in sorted(directory.glob("*.log")):
        parts += [f"--- {log.name}", *log.read_text(errors="replace").splitlines()[-lines:]]
    return "\n".join(parts)
