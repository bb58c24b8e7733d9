"""Root pytest configuration: shared fixture plugins (pytest only honours `pytest_plugins` here)."""

pytest_plugins = ["tests.e2e.fixtures", "tests.e2e.operator_fixtures"]
