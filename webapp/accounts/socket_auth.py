"""Who is on a WebSocket now, not only when it connected.

Channels' AuthMiddlewareStack reads the session once, at connect. A socket can stay open
for hours: a user who logs out, is deactivated or changes their password must lose it.
Consumers call `socket_user` again (per message, or on a timer) and close when it no longer
answers the user who connected.
"""

from __future__ import annotations

from importlib import import_module
from types import SimpleNamespace
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.auth.models import AnonymousUser


def _session_user_now(session_key: str | None) -> Any:
    if not session_key:
        return AnonymousUser()
    # A fresh store: the scope's session object caches what it read at connect.
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    # django.contrib.auth.get_user checks the backend, the user's is_active (through the
    # backend) and the session's password hash, and flushes a session that fails them.
    return get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]


@database_sync_to_async
def socket_user(scope: dict[str, Any]) -> Any:
    """The user the socket's session belongs to now: AnonymousUser once it was logged out,
    expired, deactivated or its password changed. Permissions are read fresh, too."""
    session = scope.get("session")
    user = _session_user_now(getattr(session, "session_key", None))
    connected = scope.get("user")
    if not getattr(user, "is_authenticated", False) or getattr(connected, "pk", None) != user.pk:
        return AnonymousUser()
    return user
