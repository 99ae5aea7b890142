from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from webapp.core.admin import ReadOnlyTabularInline
from webapp.rewards.models import RewardRecipe, RewardRecipeVersion

# Shown, and all read-only (one name: admin's fields and readonly_fields have different types).
_VERSION_FIELDS = ("number", "created_at", "terms")


class RewardRecipeVersionInline(ReadOnlyTabularInline):
    # Versions are immutable; they are made by the API's PUT.
    model = RewardRecipeVersion
    fields = _VERSION_FIELDS
    readonly_fields = _VERSION_FIELDS


@admin.register(RewardRecipe)
class RewardRecipeAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "latest_version", "updated_at")
    list_display_links = ("id", "name")
    search_fields = ("name", "owner__username")
    readonly_fields = ("owner", "latest_version", "created_at", "updated_at")
    inlines = (RewardRecipeVersionInline,)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # terms are validated by webapp.rewards.services, through the API
