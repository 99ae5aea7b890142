"""The suite's options and hooks; its shared fixtures are the plugins in tests/fixtures/, one
module a domain."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def pytest_configure(config: pytest.Config) -> None:
    # A transactional test's flush that loses a deadlock to the session's worker is tried again
    # (tests/support/flush.py). After Django is set up: pytest-django configures it first.
    from tests.support.flush import retry_flush_after_deadlock

    retry_flush_after_deadlock()

pytest_plugins = [
    "tests.fixtures.accounts",
    "tests.fixtures.catalog",
    "tests.fixtures.runs",
    "tests.fixtures.servers",
]

# The fixtures that give a test the database (pytest-django refuses it to any other test).
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "live_server", "django_db_reset_sequences",
                               "django_db_serialized_rollback"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-tests-only", action="store_true",
        help="deselect the tests that have no database access: they cannot differ by database "
        "engine, so a second pass of the suite on another engine need not run them again (the "
        "browser and sqlite_pass tests stay: `make test` runs them in that pass only)",
    )


def uses_database(item: pytest.Item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(
        DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--database-tests-only"):
        return
    kept, dropped = [], []
    for item in items:
        runs_only_here = item.get_closest_marker("browser") or item.get_closest_marker("sqlite_pass")
        (kept if runs_only_here or uses_database(item) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
