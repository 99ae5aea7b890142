"""Who a request is from, typed as the lab's user model.

`request.user` is typed `User | AnonymousUser`, while services record a user as an owner and
filter rows by it, which only a `User` can be. Views behind `login_required`, or DRF's
`IsAuthenticated` (the API's default), narrow it once here instead of casting at each call.
"""

from __future__ import annotations

from typing import TypeGuard, TypeVar

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from rest_framework.request import Request


def signed_in_user(request: HttpRequest | Request) -> User:
    """The signed-in user of a request that only signed-in users reach. The check is the one
    `login_required` and `IsAuthenticated` already made, so an anonymous request here is a
    view missing its guard: refused (403), never served as nobody."""
    user = request.user
    if not user.is_authenticated:
        raise PermissionDenied("sign in first")
    return user


def is_signed_in(user: object) -> TypeGuard[User]:
    """Whether `user` is a signed-in, active user: what the visibility selectors ask of any
    user they are given (a request's, a socket's, or none)."""
    return bool(getattr(user, "is_authenticated", False) and getattr(user, "is_active", False))


M = TypeVar("M", bound=Model)


def owned_or_all(rows: QuerySet[M], *, user: object, view: str, change: str) -> QuerySet[M]:
    """`rows` as `user` sees them: all of them with the permission `view` or `change`, else
    their own (`owner`), and none for a visitor or an inactive user (who get a 404)."""
    if not is_signed_in(user):
        return rows.none()
    if user.has_perm(view) or user.has_perm(change):
        return rows
    return rows.filter(owner=user)


def owner_or_permitted(*, user: object, owner_id: int | None, change: str) -> bool:
    """Whether `user` may change a row owned by `owner_id`: its owner, or one with `change`."""
    if not is_signed_in(user):
        return False
    return owner_id == user.pk or user.has_perm(change)
