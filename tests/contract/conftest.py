"""The contract tier: every test here reads the real upstream sources (fetched once, then offline)."""

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/contract/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.contract)
