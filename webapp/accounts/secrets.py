"""Writes and reads of per-user secrets.

Values are encrypted with Fernet under `settings.ENVLAB_SECRETS_KEY`. Only the worker that
trains a run of the secret's owner, and that owner's own console, ever decrypt one; API
responses, pages and logs carry only whether it is set and its last four characters.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.contrib.auth.models import User

from webapp.accounts.models import UserSecret
from webapp.core.notify_urls import NotifyUrlRefused, notify_url_check

MAX_SECRET_LENGTH = 512


class SecretRejected(ValueError):
    """The value cannot be stored; the message says why (and never contains the value)."""


@dataclass(frozen=True)
class SecretStatus:
    name: str
    label: str
    is_set: bool
    last4: str

    @property
    def display(self) -> str:
        return f"set (…{self.last4})" if self.is_set else "not set"


def _fernet() -> Fernet:
    key = settings.ENVLAB_SECRETS_KEY
    if not key:
        raise SecretRejected("secrets cannot be stored: ENVLAB_SECRETS_KEY is not configured")
    return Fernet(key.encode() if isinstance(key, str) else key)


def _readers() -> MultiFernet:
    """The current key first, then ENVLAB_SECRETS_PREVIOUS_KEYS (read only)."""
    previous = [Fernet(k.encode() if isinstance(k, str) else k) for k in settings.ENVLAB_SECRETS_PREVIOUS_KEYS if k]
    return MultiFernet([_fernet(), *previous])


def _current(ciphertext: str) -> bool:
    try:
        _fernet().decrypt(ciphertext.encode())
        return True
    except InvalidToken:
        return False


def user_secrets_reencrypt() -> int:
    """Store every value that a previous key encrypted again under the current one (`make run`
    does this at start, through envlab_setup). Values no key reads are left as they are (they
    read as unset). Returns how many were re-encrypted."""
    readers = _readers()
    count = 0
    for row in UserSecret.objects.only("pk", "ciphertext").iterator():
        if _current(row.ciphertext):
            continue
        try:
            token = readers.rotate(row.ciphertext.encode()).decode()
        except InvalidToken:
            continue
        UserSecret.objects.filter(pk=row.pk, ciphertext=row.ciphertext).update(ciphertext=token)
        count += 1
    return count


def user_secret_set(*, user: User, name: str, value: str) -> SecretStatus:
    if name not in UserSecret.Name.values:
        raise SecretRejected(f"unknown secret '{name[:40]}'; use one of {', '.join(UserSecret.Name.values)}")
    value = (value or "").strip()
    if not value:
        raise SecretRejected("give a value (to remove the secret, delete it)")
    if len(value) > MAX_SECRET_LENGTH or any(c.isspace() or not c.isprintable() for c in value):
        raise SecretRejected(f"a key is up to {MAX_SECRET_LENGTH} printable characters without spaces")
    if name == UserSecret.Name.NOTIFY_URL:
        try:
            notify_url_check(value, resolve=False)
        except NotifyUrlRefused as exc:
            raise SecretRejected(str(exc)) from None
    UserSecret.objects.update_or_create(
        user=user, name=name,
        defaults={"ciphertext": _fernet().encrypt(value.encode()).decode(), "last4": value[-4:]},
    )
    return user_secret_status(user=user, name=name)


def user_secret_delete(*, user: User, name: str) -> None:
    UserSecret.objects.filter(user=user, name=name).delete()


def user_secret_status(*, user: User, name: str) -> SecretStatus:
    row = UserSecret.objects.filter(user=user, name=name).only("last4").first()
    label = UserSecret.Name(name).label if name in UserSecret.Name.values else name
    return SecretStatus(name=name, label=str(label), is_set=row is not None, last4=row.last4 if row else "")


def user_secrets_status(*, user: User) -> list[SecretStatus]:
    return [user_secret_status(user=user, name=name) for name in UserSecret.Name.values]


def user_secret_value(*, user: User | None, name: str) -> str | None:
    """The decrypted value, for the owner's own runs and console only; None when unset.

    A value that no longer decrypts (the key was changed and the old one is not among
    ENVLAB_SECRETS_PREVIOUS_KEYS) counts as unset rather than failing the run with a
    cryptography traceback.
    """
    if user is None or not getattr(user, "pk", None):
        return None
    row = UserSecret.objects.filter(user=user, name=name).first()
    if row is None:
        return None
    try:
        return _fernet().decrypt(row.ciphertext.encode()).decode()
    except InvalidToken:
        pass
    try:
        value = _readers().decrypt(row.ciphertext.encode()).decode()
    except InvalidToken:
        return None
    # Stored under a previous key: from now on under the current one.
    UserSecret.objects.filter(pk=row.pk, ciphertext=row.ciphertext).update(
        ciphertext=_fernet().encrypt(value.encode()).decode()
    )
    return value
