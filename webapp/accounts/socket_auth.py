"""Who is on a WebSocket now, not only when it connected.

A socket is signed in by its session cookie (a page) or, for scripts and the `envlab`
command, by an API token in the handshake's `Authorization: Token <token>` header
(`TokenSocketAuth`). A browser page cannot set that header on a WebSocket, so another site
cannot borrow a token the way it could ride a cookie. A token given is the only credential
looked at: a wrong or expired one leaves the socket unauthenticated, whatever the cookie.

Channels' AuthMiddlewareStack reads the session once, at connect. A socket can stay open
for hours: a user who logs out, is deactivated or changes their password must lose it, and
so must a token that is revoked or expires. Consumers call `socket_user` again (per
message, or on a timer) and close when it no longer answers the user who connected.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from types import SimpleNamespace
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.auth.models import AnonymousUser
from knox.auth import TokenAuthentication
from knox.settings import knox_settings
from rest_framework.exceptions import AuthenticationFailed

# The scope key holding the token a socket signed in with (server memory only, never sent).
TOKEN_SCOPE_KEY = "envlab_api_token"


def _header_token(scope: dict[str, Any]) -> str | None:
    """The token of an `Authorization: Token <token>` handshake header; None without one."""
    prefix = knox_settings.AUTH_HEADER_PREFIX.lower()
    for name, value in scope.get("headers") or ():
        if name.lower() == b"authorization":
            kind, _, token = value.decode("latin1").strip().partition(" ")
            if kind.lower() == prefix and token.strip():
                return token.strip()
    return None


def _token_user_now(token: str) -> Any:
    """The token's user if the token is still valid (not revoked, not expired) and the user
    active; AnonymousUser otherwise. Knox deletes an expired token it meets."""
    try:
        user, _ = TokenAuthentication().authenticate_credentials(token.encode())
    except AuthenticationFailed:
        return AnonymousUser()
    return user


class TokenSocketAuth:
    """ASGI middleware inside Channels' AuthMiddlewareStack: a handshake that carries an API
    token is signed in as the token's user (or as nobody, when the token is not valid)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        token = _header_token(scope)
        if token is not None:
            user = await database_sync_to_async(_token_user_now)(token)
            scope = {**scope, "user": user, TOKEN_SCOPE_KEY: token}
        return await self.inner(scope, receive, send)


def _session_user_now(session_key: str | None) -> Any:
    if not session_key:
        return AnonymousUser()
    # A fresh store: the scope's session object caches what it read at connect.
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    # django.contrib.auth.get_user checks the backend, the user's is_active (through the
    # backend) and the session's password hash, and flushes a session that fails them.
    return get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]


@database_sync_to_async
def socket_user(scope: Mapping[str, Any]) -> Any:
    """The user the socket's session or token belongs to now: AnonymousUser once it was logged
    out, expired, revoked, deactivated or its password changed. Permissions are read fresh, too."""
    token = scope.get(TOKEN_SCOPE_KEY)
    if token:
        user = _token_user_now(token)
    else:
        session = scope.get("session")
        user = _session_user_now(getattr(session, "session_key", None))
    connected = scope.get("user")
    if not getattr(user, "is_authenticated", False) or getattr(connected, "pk", None) != user.pk:
        return AnonymousUser()
    return user
