"""Fixtures of the server-rendered pages' tests: signed-in clients and an echo environment
row (no server behind it). The personas are tests/conftest.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from tests.webapp.pages import ECHO_TOOLS, signed_in
from webapp.catalog.models import Environment


@pytest.fixture
def owner_client(owner: User) -> Client:
    return signed_in(owner)


@pytest.fixture
def outsider_client(outsider: User) -> Client:
    return signed_in(outsider)


@pytest.fixture
def echo_env(owner: User) -> Environment:
    return Environment.objects.create(
        owner=owner,
        name="echo",
        base_url="http://127.0.0.1:9",
        status=Environment.Status.HEALTHY,
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
