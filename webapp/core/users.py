"""Who a request is from, typed as the lab's user model.

`request.user` is typed `User | AnonymousUser`, while services record a user as an owner and
filter rows by it, which only a `User` can be. Views behind `login_required`, or DRF's
`IsAuthenticated` (the API's default), narrow it once here instead of casting at each call.
"""

from __future__ import annotations

from typing import TypeGuard

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
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
