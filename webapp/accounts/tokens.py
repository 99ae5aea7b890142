"""API tokens a signed-in user makes for scripts (the account page's "Create token", `POST
/api/auth/tokens/`): knox tokens with the lab's expiry, under the per-user limit (security
review N7), each with a name. The token itself is shown once, in the answer that made it; the
database keeps only its digest."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from knox.models import AuthToken
from knox.settings import knox_settings

from webapp.accounts.models import TokenName
from webapp.core.errors import InvalidInput
from webapp.core.quota import lock_owner
from webapp.core.textcheck import nul_errors

MAX_NAME = 80


class TokenRefused(InvalidInput):
    pass


class TokenLimitReached(Exception):
    """The user holds as many live tokens as one account may."""


def token_limit_error(*, user: User) -> str | None:
    limit = knox_settings.TOKEN_LIMIT_PER_USER
    if limit is not None and AuthToken.objects.filter(user=user, expiry__gt=timezone.now()).count() >= limit:
        return (
            f"you have {limit} API tokens, the most one account may hold: revoke one on the account "
            "page (or DELETE /api/auth/tokens/<key>/) first"
        )
    return None


def user_token_create(*, user: User, name: str) -> tuple[str, datetime | None, str]:
    """A new named token of `user`: (the token, shown once; its expiry; its first characters).
    TokenRefused for a bad name, TokenLimitReached past the limit; nothing is written then."""
    name = name.strip() if isinstance(name, str) else ""
    if not name or len(name) > MAX_NAME or "\n" in name or "\r" in name or nul_errors(name):
        raise TokenRefused({"name": [f"give the token a name of 1 to {MAX_NAME} characters on one line"]})
    with transaction.atomic():
        lock_owner(user)  # two tabs creating at once count against one limit
        refused = token_limit_error(user=user)
        if refused:
            raise TokenLimitReached(refused)
        instance, token = AuthToken.objects.create(user=user, expiry=knox_settings.TOKEN_TTL)
        TokenName.objects.create(token=instance, name=name)
    return token, instance.expiry, instance.token_key
