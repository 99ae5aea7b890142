"""Console socket slots: at most `ENVLAB_CONSOLE_MAX_SOCKETS` open consoles per user.

Each open console holds a sampled session of its environment's server, which training
runs need, so one user must not hold many. A slot is a ConsoleConnection row, so the cap
holds across every web process. A slot is leased: the consumer renews it while it lives
(`LEASE_SECONDS`), and a process that died without closing its sockets leaves rows that
stop counting when they expire and are deleted at the next claim (anyone's).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from webapp.catalog.models import ConsoleConnection, Environment

LEASE_SECONDS = 90.0


def console_max_sockets() -> int:
    return int(getattr(settings, "ENVLAB_CONSOLE_MAX_SOCKETS", 4))


def console_socket_claim(
    *, user: Any, environment: Environment, lease_seconds: float = LEASE_SECONDS
) -> ConsoleConnection | None:
    """A slot for a new console of `user`, or None when they hold the maximum already."""
    now = timezone.now()
    with transaction.atomic():
        # Serialises one user's claims where the database locks rows (PostgreSQL); SQLite
        # lets one writer at a time in anyway, and the insert below comes before the count.
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        # Everyone's expired rows, not only this user's: the table stays as small as the
        # number of open consoles.
        ConsoleConnection.objects.filter(expires_at__lte=now).delete()
        connection = ConsoleConnection.objects.create(
            user=user, environment=environment, expires_at=now + timedelta(seconds=lease_seconds)
        )
        # Counted with this row in: of concurrent claims, the earliest rows win.
        held = ConsoleConnection.objects.filter(
            user=user, expires_at__gt=now, pk__lte=connection.pk
        ).count()
        if held > console_max_sockets():
            connection.delete()
            return None
    return connection


def console_socket_renew(*, connection_id: int, lease_seconds: float = LEASE_SECONDS) -> bool:
    """Extend a live slot; False when it is gone (expired and reclaimed, or deleted)."""
    expires_at = timezone.now() + timedelta(seconds=lease_seconds)
    return bool(ConsoleConnection.objects.filter(pk=connection_id).update(expires_at=expires_at))


def console_socket_release(*, connection_id: int) -> None:
    ConsoleConnection.objects.filter(pk=connection_id).delete()
