"""Fixtures of the server-rendered pages' tests: an echo environment row with no server behind
it (the suite's echo_env has one) and an empty models folder. The personas and their clients
are tests/fixtures/accounts.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.factories import EnvironmentFactory
from tests.webapp.pages import ECHO_TOOLS
from webapp.catalog.models import Environment


@pytest.fixture
def echo_env(owner: User) -> Environment:
    return EnvironmentFactory(
        owner=owner,
        name="echo",
        tools=ECHO_TOOLS,
        capacity=16,
        metadata={"name": "EchoEnvironment", "version": "1.0"},
        checked_at=timezone.now(),
    )


@pytest.fixture
def no_models(settings: Any, tmp_path: Path) -> Path:
    """An empty model folder: no demo model is built in these tests."""
    settings.MODELS_DIR = tmp_path / "models"
    return settings.MODELS_DIR
