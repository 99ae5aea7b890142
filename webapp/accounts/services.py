"""Writes for accounts: the local demo login."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

# Installations before the demo password was random created `demo` / `demo`.
OLD_DEFAULT_PASSWORD = "demo"


def demo_password_file() -> Path:
    return Path(settings.VAR_DIR) / "demo-login"


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def demo_user_ensure(*, username: str, password: str | None = None) -> tuple[User, str | None]:
    """The local superuser `make run` signs in with, and the password to print.

    A new user gets `password`, or a random one; it is kept in `var/demo-login` (mode 600)
    so a second `make run` can print it again. A user still on the old `demo` password is
    given a random one. A password the user chose (no file, not the old default) is left
    alone and None is returned: nothing to print.
    """
    user_model = get_user_model()
    path = demo_password_file()
    user = user_model.objects.filter(username=username).first()
    if user is None:
        chosen = password or secrets.token_urlsafe(12)
        user = user_model.objects.create_superuser(username=username, password=chosen, email="")
        _write_private(path, chosen)
        return user, chosen
    if password:
        user.set_password(password)
        user.save(update_fields=["password"])
        _write_private(path, password)
        return user, password
    if path.exists():
        stored = path.read_text().strip()
        if stored and user.check_password(stored):
            return user, stored
    if user.check_password(OLD_DEFAULT_PASSWORD):
        chosen = secrets.token_urlsafe(12)
        user.set_password(chosen)
        user.save(update_fields=["password"])
        _write_private(path, chosen)
        return user, chosen
    path.unlink(missing_ok=True)  # stale: the user changed the password since
    return user, None


def user_tokens_revoke(*, user: User) -> int:
    """Delete every API token of `user` (their password changed: a token made with the old
    one must not outlive it, security review N7). Returns how many there were."""
    from knox.models import AuthToken

    deleted, _ = AuthToken.objects.filter(user=user).delete()
    return int(deleted)
