"""Shared fixtures: personas and API clients."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

# The fixtures that give a test the database (pytest-django refuses it to any other test).
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "live_server", "django_db_reset_sequences",
                               "django_db_serialized_rollback"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-tests-only", action="store_true",
        help="deselect the tests that have no database access: they cannot differ by database "
        "engine, so a second pass of the suite on another engine need not run them again",
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
        (kept if uses_database(item) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="owner-pw")


@pytest.fixture
def outsider(django_user_model):
    return django_user_model.objects.create_user("outsider", password="outsider-pw")


@pytest.fixture
def staff(django_user_model):
    """Staff without model permissions: opens the admin, sees and changes nobody else's things."""
    return django_user_model.objects.create_user("staff", password="staff-pw", is_staff=True)


# What an administrator is given to see and act on everyone's environments, runs and snapshots.
OPERATOR_PERMISSIONS = (
    "catalog.view_environment",
    "catalog.change_environment",
    "catalog.change_bundledserver",
    "catalog.view_catalogsnapshot",
    "runs.view_run",
    "runs.change_run",
)


def grant(user, *permissions):
    """Give `user` these "app_label.codename" permissions; returns the user, freshly loaded
    (Django caches permissions on the instance)."""
    from django.contrib.auth.models import Permission

    for name in permissions:
        app_label, codename = name.split(".", 1)
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return type(user).objects.get(pk=user.pk)


@pytest.fixture
def operator(django_user_model):
    """Staff with the model permissions (OPERATOR_PERMISSIONS), but not a superuser."""
    user = django_user_model.objects.create_user("operator", password="operator-pw", is_staff=True)
    return grant(user, *OPERATOR_PERMISSIONS)


def _token_client(user):
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    client = APIClient()
    _, token = AuthToken.objects.create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.fixture
def api(owner):
    return _token_client(owner)


@pytest.fixture
def built_model(settings, tmp_path):
    """`demo:echo` in a models folder of the test's own: a folder that looks like a saved model
    (config.json), which is all a launch checks."""
    settings.MODELS_DIR = tmp_path
    (tmp_path / "echo").mkdir()
    (tmp_path / "echo" / "config.json").write_text("{}")
    return "demo:echo"


@pytest.fixture
def outsider_api(outsider):
    return _token_client(outsider)


@pytest.fixture
def staff_api(staff):
    return _token_client(staff)


@pytest.fixture
def operator_api(operator):
    return _token_client(operator)


@pytest.fixture(scope="session")
def echo_url():
    """The bundled echo environment server, a real uvicorn process."""
    from tests.envs.servers import run_env_server

    with run_env_server("envs.echo.server:app") as url:
        yield url
