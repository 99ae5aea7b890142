"""Admin for accounts' own models. Tokens are listed without any part that authenticates, and
cannot be created here (a staff account must not mint tokens for other users); secrets are
not in the admin at all."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from knox.models import AuthToken

admin.site.unregister(AuthToken)


@admin.register(AuthToken)
class AuthTokenAdmin(admin.ModelAdmin):
    list_display = ("user", "created", "expiry")
    fields = ("user", "created", "expiry")
    readonly_fields = ("user", "created", "expiry")
    search_fields = ("user__username",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
