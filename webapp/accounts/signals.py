"""A password change revokes the user's API tokens, wherever it happens.

A signal, against this project's rule, because Django gives no other hook: the admin's
password form, `manage.py changepassword` and `set_password` anywhere else all end in the
user's save. The rule itself is the service `user_tokens_revoke`.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import pre_save

from webapp.accounts.services import user_tokens_revoke


def _password_changed(sender: Any, instance: Any, raw: bool = False, **kwargs: Any) -> None:
    if raw or instance.pk is None:
        return
    stored = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    if stored is not None and stored != instance.password:
        user_tokens_revoke(user=instance)


def connect() -> None:
    pre_save.connect(_password_changed, sender=get_user_model(), dispatch_uid="envlab-password-tokens")
