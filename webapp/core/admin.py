"""Admin pieces the apps share (core registers no model of its own)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest


class ReadOnlyTabularInline(admin.TabularInline):
    """Rows shown under their parent and never added or deleted there (they are made by the
    app's own flow); a subclass names its `fields` read-only too."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
