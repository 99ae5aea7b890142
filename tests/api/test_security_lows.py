"""Small holes of the third security review: deeply nested JSON (N9), two cloud metadata
addresses (N12) and the per-user token limit (N7)."""

from __future__ import annotations

import ipaddress

import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from envs.netguard import address_refusal

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/api/reward-recipes/validate/", "/api/runs/", "/api/catalog-snapshots/", "/api/account/run-layout/"])
def test_deeply_nested_json_is_a_400(api, path: str) -> None:
    body = "[" * 50_000 + "]" * 50_000
    method = "PUT" if path.endswith("run-layout/") else "POST"
    response = api.generic(method, path, body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert response.json() == {"detail": "JSON parse error - the body is nested too deeply"}


@pytest.mark.parametrize(
    ("address", "allowed"), [("100.100.100.200", "100.64.0.0/10"), ("fd20:ce::254", "fc00::/7")]
)
def test_cloud_metadata_addresses_stay_refused_inside_allowed_ranges(address: str, allowed: str) -> None:
    assert address_refusal(address, [ipaddress.ip_network(allowed)]) == f"{address} (cloud metadata) is never allowed"
    neighbour = str(ipaddress.ip_address(address) + 1)
    assert address_refusal(neighbour, [ipaddress.ip_network(allowed)]) is None


def test_the_token_limit_per_user_is_kept(owner, settings) -> None:
    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_LIMIT_PER_USER": 3}
    from django.core.cache import cache

    cache.clear()
    client = APIClient()
    codes = [
        client.post("/api/auth/token/", {"username": "owner", "password": "owner-pw"}, format="json").status_code
        for _ in range(4)
    ]
    assert codes == [200, 200, 200, 403]
    refused = client.post("/api/auth/token/", {"username": "owner", "password": "owner-pw"}, format="json")
    assert "the most one account may hold" in refused.json()["detail"]
    assert AuthToken.objects.filter(user=owner).count() == 3


def test_a_password_change_revokes_the_users_tokens(owner, outsider) -> None:
    for user in (owner, outsider):
        AuthToken.objects.create(user=user)
    owner.first_name = "Own"
    owner.save()  # not a password change: the tokens stay
    assert AuthToken.objects.filter(user=owner).count() == 1
    owner.set_password("a-new-password-1")
    owner.save()
    assert AuthToken.objects.filter(user=owner).count() == 0
    assert AuthToken.objects.filter(user=outsider).count() == 1  # nobody else's
