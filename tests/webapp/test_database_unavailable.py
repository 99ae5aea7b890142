"""The web process while PostgreSQL is away (issue 23 item 5): pages answer 503 with a short
page that says so, the API a JSON 503, both with Retry-After, never a traceback (DEBUG on);
once the database is back the same requests succeed. A real uvicorn server on a PostgreSQL
cluster of the test's own (tests/support/pg_cluster.py), really stopped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from django.db.utils import ConnectionHandler
from django.http import HttpResponse
from django.test import RequestFactory, override_settings

from tests.envs.servers import free_port
from tests.support.pg_cluster import PgCluster, prepare_database
from tests.support.processes import start_web
from webapp.core.dbdown import DETAIL, DatabaseUnavailableMiddleware, database_outage

UNREACHABLE = "The database is unreachable"


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    if reason := PgCluster.available():
        pytest.skip(f"no PostgreSQL cluster of the test's own: {reason}")
    owned = PgCluster().start()
    yield owned
    owned.destroy()


@pytest.fixture(scope="module")
def site(cluster: PgCluster) -> Iterator[str]:
    url = cluster.create_database("web")
    prepare_database(url)
    port = free_port()
    service = start_web(port, name="web-pg-outage", DATABASE_URL=url, ENVLAB_TEST_DEBUG="1")
    yield f"http://127.0.0.1:{port}"
    service.stop()


def _signed_in(site: str) -> requests.Session:
    browser = requests.Session()
    browser.get(f"{site}/login/", timeout=10)
    answer = browser.post(
        f"{site}/login/",
        data={
            "username": "owner",
            "password": "owner-pass",
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
        headers={"Referer": f"{site}/login/"},
        timeout=10,
    )
    assert answer.status_code == 200 and answer.url == f"{site}/", answer.text[:500]
    return browser


def test_pages_and_the_api_answer_503_while_the_database_is_stopped_and_recover(site, cluster):
    browser = _signed_in(site)
    token = requests.post(
        f"{site}/api/auth/token/", json={"username": "owner", "password": "owner-pass"}, timeout=10
    ).json()["token"]
    api_headers = {"Authorization": f"Token {token}"}
    assert browser.get(f"{site}/", timeout=10).status_code == 200
    assert requests.get(f"{site}/api/runs/", headers=api_headers, timeout=10).status_code == 200

    cluster.stop()
    try:
        page = browser.get(f"{site}/", timeout=30)
        api = requests.get(f"{site}/api/runs/", headers=api_headers, timeout=30)
        api_by_session = browser.get(f"{site}/api/runs/", timeout=30)
    finally:
        cluster.start()

    assert (page.status_code, page.headers["Retry-After"], page.headers["Content-Type"]) == (
        503,
        "10",
        "text/html; charset=utf-8",
    )
    assert UNREACHABLE in page.text
    for leak in ("Traceback", "OperationalError", "psycopg", "connection refused", "127.0.0.1"):
        assert leak not in page.text
    for answer in (api, api_by_session):
        assert (answer.status_code, answer.headers["Retry-After"], answer.json()) == (
            503,
            "10",
            {"detail": DETAIL},
        )

    # Back: the same session and token work again, nothing to restart.
    assert browser.get(f"{site}/", timeout=10).status_code == 200
    assert requests.get(f"{site}/api/runs/", headers=api_headers, timeout=10).status_code == 200


def _refused_connection_error(cluster: PgCluster) -> Exception:
    """The error Django raises when it opens a connection to the stopped cluster."""
    handler = ConnectionHandler(
        {
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": "postgres",
                "USER": "postgres",
                "HOST": "127.0.0.1",
                "PORT": str(cluster.port),
            },
        }
    )
    try:
        handler["default"].ensure_connection()
    except Exception as exc:
        return exc
    finally:
        handler.close_all()
    raise AssertionError("the stopped cluster accepted a connection")


@override_settings(DEBUG=True)
def test_a_database_error_raised_below_in_a_middleware_becomes_the_503_not_the_debug_page(
    cluster, django_db_blocker
):
    """Django turns an exception raised in a middleware into a 500 (the technical page with
    DEBUG on) before it reaches this one; the 503 replaces it."""
    from django.core.handlers.exception import convert_exception_to_response

    cluster.stop()
    try:
        with (
            django_db_blocker.unblock()
        ):  # a connection of its own to the owned cluster, not the test database
            error = _refused_connection_error(cluster)
    finally:
        cluster.start()
    assert database_outage(error), repr(error)

    def inner(request):
        raise error

    middleware = DatabaseUnavailableMiddleware(convert_exception_to_response(inner))
    page = middleware(RequestFactory().get("/runs/"))
    api = middleware(RequestFactory().get("/api/runs/"))

    assert (page.status_code, page["Retry-After"]) == (503, "10")
    assert UNREACHABLE in page.content.decode() and "Traceback" not in page.content.decode()
    assert (api.status_code, api["Content-Type"]) == (503, "application/json")


@override_settings(DEBUG=False)
def test_other_server_errors_stay_500():
    from django.core.handlers.exception import convert_exception_to_response
    from django.db import OperationalError

    def broken(request):
        raise KeyError("a bug")

    def missing_table(request):
        raise OperationalError("no such table: runs_run")

    for view in (broken, missing_table):
        answer = DatabaseUnavailableMiddleware(convert_exception_to_response(view))(
            RequestFactory().get("/runs/")
        )
        assert answer.status_code == 500
    assert (
        DatabaseUnavailableMiddleware(lambda r: HttpResponse("ok")).process_exception(
            RequestFactory().get("/"), ValueError("x")
        )
        is None
    )
