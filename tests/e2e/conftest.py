"""End-to-end fixtures: the real echo server (uvicorn), a real Celery worker process,
the real ASGI web server, real Redis; the fast "test" variant of the demo model."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings

from tests.envs.servers import free_port
from tests.support.demo_models import built_demo_echo
from tests.support.processes import Service, start_web, start_worker


@pytest.fixture(scope="session")
def demo_model() -> str:
    """Build the test variant once; later sessions reuse it from var/test-models."""
    return built_demo_echo()


@pytest.fixture(scope="module")
def wordle_url() -> Iterator[str]:
    """The real wordle server (uvicorn), for a module's tests."""
    from tests.envs.servers import run_env_server

    with run_env_server(
        "envs.wordle.server:app", {"ENABLE_WEB_INTERFACE": "false", "MAX_CONCURRENT_ENVS": "16"}
    ) as url:
        yield url


@pytest.fixture(scope="session")
def clean_redis() -> None:
    """Tests own their Redis database: drop queued tasks left by an earlier, aborted session."""
    redis.Redis.from_url(settings.REDIS_URL).flushdb()


@pytest.fixture(scope="session")
def worker(django_db_setup, django_db_blocker, clean_redis, demo_model) -> Iterator[Service]:
    service = start_worker("worker")
    yield service
    service.stop()


@pytest.fixture(scope="session")
def web(django_db_setup, clean_redis) -> Iterator[str]:
    port = free_port()
    service = start_web(port)
    yield f"http://127.0.0.1:{port}"
    service.stop()


@pytest.fixture
def second_worker(worker) -> Iterator[Service]:
    service = start_worker("worker2")
    yield service
    service.stop()


CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(
            "Debian's chromium is missing: make test installs it (apt-get install chromium)"
        )
    # Playwright's sync API runs an event loop in this thread for as long as the browser
    # lives; the ORM calls made here (and the database flush after each test) are plain
    # blocking calls, which Django refuses in such a thread unless told.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield browser
        browser.close()
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
