"""Root pytest configuration: shared fixture plugins (pytest only honours `pytest_plugins` here) and run order.

Why an order: on a cold machine the control-plane binaries and the Ansible test roots take tens of minutes to
build. hack/test.sh starts those builds in the background before pytest; running the suites that need neither
first, then the Ansible suite (its roots are ready sooner), then everything that needs a cluster, keeps both
cores busy instead of idling on a lock while quick tests wait behind it.
"""

from pathlib import Path

import pytest

pytest_plugins = ["tests.e2e.fixtures", "tests.e2e.operator_fixtures"]

#: Suites by how soon they can run on a cold machine; unknown directories go with the quick ones.
_SUITE_RANK = {"ansible": 1}


def _rank(item: pytest.Item) -> int:
    parts = Path(str(item.fspath)).resolve().relative_to(Path(__file__).parent.resolve()).parts
    if item.get_closest_marker("e2e") is not None:
        return 2
    return _SUITE_RANK.get(parts[1] if len(parts) > 2 else "", 0)


@pytest.hookimpl(trylast=True)  # after the suites' own hooks have added their markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A stable sort: within a rank, files and tests keep pytest's own order (module fixtures stay grouped).
    items.sort(key=_rank)
