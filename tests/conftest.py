"""Shared fixtures: personas and API clients."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="owner-pw")


@pytest.fixture
def outsider(django_user_model):
    return django_user_model.objects.create_user("outsider", password="outsider-pw")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("staff", password="staff-pw", is_staff=True)


def _token_client(user):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def api(owner):
    return _token_client(owner)


@pytest.fixture
def outsider_api(outsider):
    return _token_client(outsider)


@pytest.fixture
def staff_api(staff):
    return _token_client(staff)


@pytest.fixture(scope="session")
def echo_url():
    """The bundled echo environment server, a real uvicorn process."""
    from tests.envs.servers import run_env_server

    with run_env_server("envs.echo.server:app") as url:
        yield url
