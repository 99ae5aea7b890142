"""Sign in and out with Django's own auth views; the account page (keys and tokens)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.contrib.auth.views import LoginView, LogoutView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.decorators import method_decorator
from django.views import View
from knox.models import AuthToken
from knox.settings import knox_settings

from webapp.accounts.models import UserSecret
from webapp.accounts.secrets import (
    SecretRejected,
    user_secret_delete,
    user_secret_set,
    user_secrets_status,
)
from webapp.accounts.tokens import TokenLimitReached, TokenRefused, user_token_create
from webapp.core.throttles import throttle_posts
from webapp.core.users import signed_in_user


@method_decorator(throttle_posts("login"), name="post")
class EnvlabLoginView(LoginView):
    """Sign-in posts share the token endpoint's per-address rate: each costs a password hash,
    for an unknown username too."""

    template_name = "registration/login.html"
    redirect_authenticated_user = True


class EnvlabLogoutView(LogoutView):
    """POST only (Django 5): the nav submits a small form, so no link can sign anyone out."""


class AccountView(LoginRequiredMixin, View):
    def get(
        self, request: HttpRequest, error: str = "", status: int = 200, token_error: str = "",
        new_token: dict[str, Any] | None = None,
    ) -> HttpResponse:
        user = signed_in_user(request)
        context = {
            "nav": "account",
            "secrets": user_secrets_status(user=user),
            "tokens": AuthToken.objects.filter(user=user).select_related("label").order_by("-created"),
            "token_ttl": knox_settings.TOKEN_TTL,
            "error": error,
            "token_error": token_error,
            # Shown in this answer only: the database keeps the token's digest.
            "new_token": new_token,
        }
        return render(request, "accounts/account.html", context, status=status)

    def post(self, request: HttpRequest) -> HttpResponse:
        user = signed_in_user(request)
        action, name = request.POST.get("action", ""), request.POST.get("name", "")
        if action in ("set", "delete") and name not in UserSecret.Name.values:
            return self.get(request, error="unknown key", status=400)
        if action == "set":
            try:
                stored = user_secret_set(user=user, name=name, value=request.POST.get("value", ""))
            except SecretRejected as exc:
                return self.get(request, error=str(exc), status=400)
            messages.success(request, f"{stored.label} saved ({stored.display}).")
        elif action == "delete":
            user_secret_delete(user=user, name=name)
            messages.success(request, "Key removed.")
        elif action == "create_token":
            try:
                token, expiry, key = user_token_create(user=user, name=request.POST.get("token_name", ""))
            except TokenRefused as exc:
                return self.get(request, token_error=" ".join(exc.errors["name"]), status=400)
            except TokenLimitReached as exc:
                return self.get(request, token_error=str(exc), status=400)
            response = self.get(request, new_token={"token": token, "expiry": expiry, "token_key": key})
            response["Cache-Control"] = "no-store"  # the token must not stay in a cache
            return response
        elif action == "revoke":
            deleted, _ = AuthToken.objects.filter(
                user=user, token_key=request.POST.get("token_key", "")[:25]
            ).delete()
            messages.success(request, "Token revoked." if deleted else "No such token.")
        else:
            return self.get(request, error="unknown action", status=400)
        return redirect("account")
