"""Tokens, login lockout, throttles, request-size limits and the settings `make run` and
production use (H4, L1, M3 tokens, M7, M8)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests.envs.servers import free_port
from tests.support.processes import start_web

ROOT = Path(__file__).resolve().parents[2]


# --- API tokens ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_token_is_stored_hashed_expires_and_is_revoked_by_its_user(owner):
    client = APIClient()
    response = client.post("/api/auth/token/", {"username": "owner", "password": "owner-pw"}, format="json")
    assert response.status_code == 200
    token = response.json()["token"]
    assert set(response.json()) == {"token", "expiry"}
    row = AuthToken.objects.get(user=owner)
    assert token not in (row.digest, row.token_key) and token.startswith(row.token_key)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/runs/").status_code == 200
    listed = client.get("/api/auth/tokens/").json()
    assert [t["token_key"] for t in listed] == [row.token_key]
    assert token not in json.dumps(listed)
    assert client.delete(f"/api/auth/tokens/{row.token_key}/").status_code == 204
    assert client.get("/api/runs/").status_code == 401
    assert AuthToken.objects.count() == 0


@pytest.mark.django_db
def test_an_expired_token_is_refused_and_removed(owner):
    instance, token = AuthToken.objects.create(user=owner, expiry=timedelta(hours=1))
    AuthToken.objects.filter(pk=instance.pk).update(expiry=timezone.now() - timedelta(seconds=1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/runs/").status_code == 401
    assert AuthToken.objects.count() == 0


@pytest.mark.django_db
def test_a_user_cannot_revoke_another_users_token(owner, outsider_api):
    instance, _ = AuthToken.objects.create(user=owner)
    assert outsider_api.delete(f"/api/auth/tokens/{instance.token_key}/").status_code == 404
    assert AuthToken.objects.filter(user=owner).count() == 1


@pytest.mark.django_db
def test_the_admin_lists_tokens_without_any_part_that_authenticates(client, django_user_model, owner):
    root = django_user_model.objects.create_superuser("root", password="root-pw-long-enough")
    instance, token = AuthToken.objects.create(user=owner)
    client.force_login(root)
    page = client.get("/admin/knox/authtoken/").content.decode()
    assert "owner" in page
    # The digest (a SHA-512 of the token, the row's key in admin URLs) cannot authenticate.
    assert token not in page and instance.token_key not in page
    assert client.get("/admin/knox/authtoken/add/").status_code == 403


# --- login lockout --------------------------------------------------------------------------


@pytest.mark.django_db
def test_five_failed_logins_lock_the_form_and_the_token_endpoint(client, owner):
    codes = [client.post("/login/", {"username": "owner", "password": "wrong"}).status_code for _ in range(5)]
    assert codes == [200, 200, 200, 200, 429]  # the form again with its error, then the lockout
    locked = client.post("/login/", {"username": "owner", "password": "owner-pw"})
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    assert "_auth_user_id" not in client.session
    api = APIClient()
    answer = api.post("/api/auth/token/", {"username": "owner", "password": "owner-pw"}, format="json")
    assert answer.status_code == 429
    assert AuthToken.objects.count() == 0


@pytest.mark.django_db
def test_a_success_before_the_limit_resets_the_count(client, owner):
    for _ in range(4):
        client.post("/login/", {"username": "owner", "password": "wrong"})
    assert client.post("/login/", {"username": "owner", "password": "owner-pw"}).status_code == 302
    client.logout()
    for _ in range(4):
        client.post("/login/", {"username": "owner", "password": "wrong"})
    assert client.post("/login/", {"username": "owner", "password": "owner-pw"}).status_code == 302


# --- throttles ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_launches_are_throttled_per_user(api, outsider_api, settings):
    from django.core.cache import cache

    cache.clear()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "launch": "2/min"},
    }
    codes = [api.post("/api/runs/", {}, format="json").status_code for _ in range(3)]
    assert codes == [400, 400, 429]  # invalid configs still count: each costs a validation
    assert api.get("/api/runs/").status_code == 200  # reads are not launches
    assert outsider_api.post("/api/runs/", {}, format="json").status_code == 400  # per user


@pytest.mark.django_db
def test_the_token_endpoint_is_throttled_per_address(settings):
    from django.core.cache import cache

    cache.clear()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "login": "3/min"},
    }
    client = APIClient()
    codes = [
        client.post("/api/auth/token/", {"username": f"nobody{i}", "password": "x"}, format="json").status_code
        for i in range(4)
    ]
    assert codes == [400, 400, 400, 429]


@pytest.mark.django_db
def test_the_pages_share_the_apis_rates(client, owner, settings):
    from django.core.cache import cache

    from webapp.catalog.models import Environment

    cache.clear()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "register": "1/min"},
    }
    client.force_login(owner)
    first = client.post("/environments/", {"name": "x", "base_url": "http://169.254.169.254"})
    assert first.status_code == 200  # the form again, with the refusal
    second = client.post("/environments/", {"name": "y", "base_url": "http://169.254.169.254"})
    assert second.status_code == 429
    assert "Too many requests" in second.content.decode()
    assert client.get("/environments/").status_code == 200  # reading the page is not throttled
    assert Environment.objects.count() == 0


# --- the settings make run and production use ----------------------------------------------


@pytest.fixture
def local_web(transactional_db) -> Iterator[str]:
    """The real ASGI app under the local settings `make run` uses (uvicorn)."""
    port = free_port()
    service = start_web(port, DJANGO_SETTINGS_MODULE="webapp.settings.local")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        service.stop()


def test_local_settings_refuse_a_foreign_origin_socket_and_host(local_web):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    with pytest.raises(InvalidStatus) as refused:
        connect(f"ws://{local_web}/ws/runs/1/", origin="http://evil.example.com", open_timeout=5)
    assert refused.value.response.status_code == 403
    # The same socket from the app's own origin is let through to the consumer (which then
    # closes it: nobody is signed in), so the refusal above is the origin check's.
    with connect(f"ws://{local_web}/ws/runs/1/", origin=f"http://{local_web}", open_timeout=5) as socket:
        with pytest.raises(Exception) as closed:
            socket.recv(timeout=5)
        assert getattr(closed.value, "rcvd", None) is not None and closed.value.rcvd.code == 4401
    conn = http.client.HTTPConnection(local_web, timeout=5)
    conn.request("GET", "/login/", headers={"Host": "rebound.evil.example.com"})
    assert conn.getresponse().status == 400


def _settings_check(module: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SECRET_KEY", "ALLOWED_HOSTS", "DEBUG")}
    return subprocess.run(
        [sys.executable, "manage.py", "check", *args],
        cwd=ROOT, env={**base, "DJANGO_SETTINGS_MODULE": module, **env},
        capture_output=True, text=True, timeout=120,
    )


def test_local_settings_default_to_no_debug_and_loopback_hosts():
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DEBUG, s.ALLOWED_HOSTS, s.ENVLAB_ALLOWED_ENV_NETWORKS)"
    )
    base = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "ALLOWED_HOSTS", "ENVLAB_ALLOWED_ENV_NETWORKS")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**base, "DJANGO_SETTINGS_MODULE": "webapp.settings.local"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False ['localhost', '127.0.0.1'] ['127.0.0.0/8', '::1/128']"


PRODUCTION_ENV = {
    "SECRET_KEY": "k" * 20 + "Z9!x" * 12 + "strong-dummy-secret-for-the-deploy-check",
    "ALLOWED_HOSTS": "envlab.example.com",
    "DATABASE_URL": "sqlite:////tmp/envlab-deploy-check.sqlite3",
    "ENVLAB_SECRETS_KEY": "Zm9vYmFyYmF6cXV4cXV1eGZvb2JhcmJhenF1eHF1dXg=",
}


def test_production_settings_pass_check_deploy_with_no_warning():
    out = _settings_check("webapp.settings.production", PRODUCTION_ENV, "--deploy", "--fail-level", "WARNING")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "System check identified no issues (0 silenced)." in out.stdout


def test_production_settings_require_a_database_url():
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "DATABASE_URL"}
    out = _settings_check("webapp.settings.production", env)
    assert out.returncode != 0
    assert "production settings need DATABASE_URL" in out.stderr


# --- request bodies ------------------------------------------------------------------------


@pytest.fixture
def test_web(transactional_db) -> Iterator[str]:
    port = free_port()
    service = start_web(port)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        service.stop()


def test_bodies_over_the_limit_are_refused_before_they_are_buffered(test_web, settings):
    limit = settings.ENVLAB_MAX_REQUEST_BYTES
    conn = http.client.HTTPConnection(test_web, timeout=30)
    conn.request("POST", "/api/runs/", body=b"x" * (limit + 1), headers={"Content-Type": "application/json"})
    declared = conn.getresponse()
    assert declared.status == 413
    assert json.loads(declared.read()) == {"detail": "request body larger than 7 MB"}
    # Chunked: no Content-Length to check up front, so the bytes are counted as they come.
    conn = http.client.HTTPConnection(test_web, timeout=30)
    chunks = (b"y" * 65536 for _ in range(limit // 65536 + 2))
    conn.request("POST", "/api/runs/", body=chunks, headers={"Content-Type": "application/json"},
                 encode_chunked=True)
    chunked = conn.getresponse()
    assert chunked.status == 413
    # Under the limit the request reaches Django (anonymous: 401, not 413).
    conn = http.client.HTTPConnection(test_web, timeout=30)
    conn.request("POST", "/api/runs/", body=b"{}", headers={"Content-Type": "application/json"})
    assert conn.getresponse().status == 401


# --- the demo login make run creates --------------------------------------------------------


@pytest.mark.django_db
def test_the_demo_login_gets_a_random_password_kept_for_the_next_make_run(settings, tmp_path, django_user_model):
    from webapp.accounts.services import demo_user_ensure

    settings.VAR_DIR = tmp_path
    user, first = demo_user_ensure(username="demo")
    assert first is not None and first != "demo" and len(first) >= 16
    assert user.is_superuser and user.check_password(first)
    stored = tmp_path / "demo-login"
    assert stored.read_text() == first and stored.stat().st_mode & 0o777 == 0o600
    again, second = demo_user_ensure(username="demo")
    assert (again.pk, second) == (user.pk, first)
    assert django_user_model.objects.count() == 1


@pytest.mark.django_db
def test_an_old_demo_demo_login_is_given_a_random_password(settings, tmp_path, django_user_model):
    from webapp.accounts.services import demo_user_ensure

    settings.VAR_DIR = tmp_path
    django_user_model.objects.create_superuser("demo", password="demo", email="")
    user, shown = demo_user_ensure(username="demo")
    assert shown not in (None, "demo")
    assert not user.check_password("demo") and user.check_password(shown)


@pytest.mark.django_db
def test_a_password_the_user_chose_is_left_alone(settings, tmp_path, django_user_model):
    from webapp.accounts.services import demo_user_ensure

    settings.VAR_DIR = tmp_path
    django_user_model.objects.create_superuser("demo", password="my-own-choice-1", email="")
    (tmp_path / "demo-login").write_text("stale")
    user, shown = demo_user_ensure(username="demo")
    assert shown is None and user.check_password("my-own-choice-1")
    assert not (tmp_path / "demo-login").exists()
