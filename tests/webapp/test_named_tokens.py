"""Named API tokens from the account page and POST /api/auth/tokens/ (webapp/accounts/tokens.py):
shown once, working at once, listed by name, under the per-user limit; a refused request writes
nothing."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from knox.models import AuthToken
from rest_framework.test import APIClient

from webapp.accounts.models import TokenName

pytestmark = pytest.mark.django_db


def _token_in(page: str) -> str:
    match = re.search(r'<code id="new-token-value">([^<]+)</code>', page)
    assert match, "the page shows the new token"
    return match.group(1)


def test_the_account_page_makes_a_named_token_shown_once_that_works(owner, owner_client: Client):
    response = owner_client.post("/account/", {"action": "create_token", "token_name": "laptop"})
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    token = _token_in(response.content.decode())
    [made] = AuthToken.objects.filter(user=owner)
    assert token.startswith(made.token_key) and TokenName.objects.get(token=made).name == "laptop"

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    listed = api.get("/api/auth/tokens/")
    assert listed.status_code == 200
    assert [(t["name"], t["token_key"]) for t in listed.json()] == [("laptop", made.token_key)]

    again = owner_client.get("/account/").content.decode()
    assert token not in again and "laptop" in again and made.token_key in again  # never shown again


def test_a_bad_name_or_the_limit_refuses_and_writes_nothing(owner, owner_client: Client, settings):
    for name in ("", "   ", "two\nlines", "x" * 81, "nul\x00"):
        response = owner_client.post("/account/", {"action": "create_token", "token_name": name})
        assert response.status_code == 400, name
        assert 'id="token-error"' in response.content.decode() and 'id="new-token"' not in response.content.decode()
    assert not AuthToken.objects.exists() and not TokenName.objects.exists()

    from knox.settings import knox_settings

    limit = knox_settings.TOKEN_LIMIT_PER_USER
    assert limit is not None
    for _ in range(limit):
        AuthToken.objects.create(user=owner, expiry=knox_settings.TOKEN_TTL)
    response = owner_client.post("/account/", {"action": "create_token", "token_name": "one more"})
    assert response.status_code == 400 and "the most one account may hold" in response.content.decode()
    assert AuthToken.objects.filter(user=owner).count() == limit and not TokenName.objects.exists()


def test_the_api_makes_a_named_token_for_the_signed_in_user_only(owner, api, outsider_api):
    made = api.post("/api/auth/tokens/", {"name": "cluster"}, format="json")
    assert made.status_code == 201
    body = made.json()
    assert set(body) == {"token", "token_key", "name", "expiry"} and body["name"] == "cluster"
    assert body["token"].startswith(body["token_key"])
    assert api.post("/api/auth/tokens/", {"name": ""}, format="json").json() == {"name": ["This field may not be blank."]}
    # The outsider lists only their own (the api fixtures sign in with tokens of their own).
    assert "cluster" not in {t["name"] for t in outsider_api.get("/api/auth/tokens/").json()}
    assert APIClient().post("/api/auth/tokens/", {"name": "x"}, format="json").status_code in (401, 403)
    assert TokenName.objects.filter(token__user=owner).count() == 1
