"""Login paths cannot be sprayed or used to lock others out (security review N3): throttles
and the lockout key on the client's address, X-Forwarded-For counts only through the
operator's proxies (ENVLAB_TRUSTED_PROXIES), and every sign-in path is throttled."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def login_rate(settings):
    """The login scope at 3 a minute; proxies as the test says."""
    cache.clear()

    def set_rate(*, proxies: int = 0) -> None:
        settings.ENVLAB_TRUSTED_PROXIES = proxies
        settings.REST_FRAMEWORK = {
            **settings.REST_FRAMEWORK,
            "NUM_PROXIES": proxies,
            "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "login": "3/min"},
        }

    return set_rate


def _token_tries(client: APIClient, count: int, **headers: str) -> list[int]:
    return [
        client.post("/api/auth/token/", {"username": f"nobody{i}", "password": "x"}, format="json", **headers).status_code
        for i in range(count)
    ]


def test_a_rotated_forwarded_header_does_not_escape_the_throttle(login_rate) -> None:
    login_rate(proxies=0)
    client = APIClient()
    codes = [
        client.post("/api/auth/token/", {"username": "owner", "password": "x"}, format="json",
                    HTTP_X_FORWARDED_FOR=f"203.0.113.{i}").status_code
        for i in range(5)
    ]
    assert codes == [400, 400, 400, 429, 429]  # 30 rotated tries got no 429 before


def test_behind_a_trusted_proxy_each_client_is_counted_apart(login_rate) -> None:
    login_rate(proxies=1)
    client = APIClient()  # every request comes from the proxy's address, 127.0.0.1
    first = _token_tries(client, 4, HTTP_X_FORWARDED_FOR="203.0.113.1")
    second = _token_tries(client, 1, HTTP_X_FORWARDED_FOR="198.51.100.7, 203.0.113.2")
    assert (first, second) == ([400, 400, 400, 429], [400])  # the proxy appended .2: that counts


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_every_sign_in_form_is_throttled_per_address(login_rate, path: str) -> None:
    login_rate(proxies=0)
    client = Client()
    codes = [client.post(path, {"username": f"user{i}", "password": "x"}).status_code for i in range(5)]
    assert codes == [200, 200, 200, 429, 429]  # 40 form logins over 40 usernames: all 200 before
    assert "_auth_user_id" not in client.session


def test_one_clients_failures_do_not_lock_the_username_for_others(login_rate, owner, settings) -> None:
    login_rate(proxies=1)
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "login": "100/min"}}
    attacker, victim = Client(HTTP_X_FORWARDED_FOR="203.0.113.9"), Client(HTTP_X_FORWARDED_FOR="198.51.100.3")
    codes = [attacker.post("/login/", {"username": "owner", "password": "wrong"}).status_code for _ in range(5)]
    assert codes == [200, 200, 200, 200, 429]  # the attacker's address is locked for that username
    assert attacker.post("/login/", {"username": "owner", "password": "owner-pw"}).status_code == 429
    assert victim.post("/login/", {"username": "owner", "password": "owner-pw"}).status_code == 302
    assert "_auth_user_id" in victim.session
