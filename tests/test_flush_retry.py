"""tests/support/flush.py: a flush that lost a deadlock is tried again; any other error is not."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError
from django.test.testcases import TransactionTestCase

from tests.support import flush


def test_the_suites_transactional_flush_retries_a_lost_deadlock_and_nothing_else(monkeypatch):
    assert getattr(TransactionTestCase._fixture_teardown, "retries_deadlocks", False)  # set up by conftest
    calls: list[int] = []

    def original(self):
        calls.append(1)
        if len(calls) < 3:
            raise CommandError("Database couldn't be flushed.") from RuntimeError("deadlock detected\nDETAIL: ...")
        return "flushed"

    monkeypatch.setattr(TransactionTestCase, "_fixture_teardown", original)
    monkeypatch.setattr(flush.time, "sleep", lambda seconds: None)
    flush.retry_flush_after_deadlock()
    assert TransactionTestCase._fixture_teardown(object()) == "flushed" and len(calls) == 3

    def broken(self):
        raise CommandError("Database couldn't be flushed.") from RuntimeError("relation does not exist")

    monkeypatch.setattr(TransactionTestCase, "_fixture_teardown", broken)
    flush.retry_flush_after_deadlock()
    with pytest.raises(CommandError):
        TransactionTestCase._fixture_teardown(object())
