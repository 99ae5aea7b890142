"""Fixtures the training tests share."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import RunFactory
from webapp.runs.services import run_claim


@pytest.fixture
def claimed_run(owner: Any, request: pytest.FixtureRequest) -> Any:
    """A run that worker "w" holds with lease "lease-a", as the training loop finds it. It trains
    10 steps unless the test's module sets CLAIMED_RUN_MAX_STEPS (a module whose tests log more)."""
    run = RunFactory(owner=owner, name="r", max_steps=getattr(request.module, "CLAIMED_RUN_MAX_STEPS", 10))
    run_claim(run_id=run.pk, lease_owner="lease-a", worker_name="w")
    return run
