"""A transactional test's flush that loses a deadlock is tried again.

On PostgreSQL a transactional test ends with one TRUNCATE of every table, which takes each
table's exclusive lock in turn. The session's Celery worker, alive from earlier end-to-end
tests, may at that moment be writing a row that references another table (a heartbeat, the
end of a run a test left behind): each waits for a lock the other holds, and PostgreSQL ends
one of them, which may be the TRUNCATE (CI saw `deadlock detected` fail two tests' flush).
The worker's write then finishes, and the same flush goes through. Any other error is raised
as it was.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import CommandError
from django.test.testcases import TransactionTestCase

ATTEMPTS = 5


def _lost_a_deadlock(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if "deadlock detected" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def retry_flush_after_deadlock() -> None:
    original = TransactionTestCase._fixture_teardown
    if getattr(original, "retries_deadlocks", False):
        return

    def teardown(self: Any) -> Any:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return original(self)
            except CommandError as exc:
                if attempt == ATTEMPTS or not _lost_a_deadlock(exc):
                    raise
                time.sleep(0.2 * attempt)
        return None

    teardown.retries_deadlocks = True  # type: ignore[attr-defined]
    TransactionTestCase._fixture_teardown = teardown  # type: ignore[method-assign]
