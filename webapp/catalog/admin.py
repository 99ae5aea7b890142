from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from webapp.catalog.bundled import BUNDLED, BundledError, bundled_start, bundled_stop
from webapp.catalog.models import BundledServer, CatalogSnapshot, Environment
from webapp.catalog.names import reserved_name_refusal
from webapp.catalog.services import (
    EnvironmentRejected,
    environment_container_stop,
    environment_probe,
    environment_set_shared,
)


class EnvironmentAdminForm(forms.ModelForm):
    class Meta:
        model = Environment
        # Every editable field, named: a field added to the model is not on the admin form
        # until it is added here (the admin's readonly_fields leave the form as before).
        fields = (
            "name",
            "kind",
            "base_url",
            "owner",
            "shared",
            "container_id",
            "status",
            "tools",
            "capacity",
            "metadata",
            "last_error",
            "checked_at",
        )

    def clean_name(self) -> str:
        # The bundled servers' names stay theirs here too (webapp.catalog.names): no entry is
        # given one. An entry keeps the name it has (the bundled entries have theirs).
        name = str(self.cleaned_data.get("name") or "")
        refusal = reserved_name_refusal(name) if name != self.instance.name else ""
        if refusal:
            raise forms.ValidationError(refusal)
        return name


@admin.register(Environment)
class EnvironmentAdmin(admin.ModelAdmin):
    form = EnvironmentAdminForm
    list_display = (
        "name",
        "kind",
        "status",
        "base_url",
        "capacity",
        "tool_names",
        "owner",
        "shared",
        "checked_at",
    )
    list_filter = ("kind", "status", "shared")
    search_fields = ("name", "base_url")
    list_select_related = ("owner",)
    # The container id is what `docker run` printed: stopping it is the action's job.
    readonly_fields = ("container_id", "checked_at", "created_at")
    actions = ("probe_selected", "stop_containers")

    def save_model(self, request: HttpRequest, obj: Environment, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if change and "shared" in form.changed_data and not obj.shared:
            # As the page and the API do: other users' runs on it stop (security review N10).
            environment_set_shared(environment=obj, shared=False)

    @admin.display(description="tools")
    def tool_names(self, environment: Environment) -> str:
        tools = environment.tools if isinstance(environment.tools, list) else []
        return ", ".join(str(t.get("name", "")) for t in tools if isinstance(t, dict))

    # Actions declare the model permission they need: a view-only staff account gets none.
    @admin.action(description="Probe selected environments", permissions=["change"])
    def probe_selected(self, request: HttpRequest, queryset: QuerySet[Environment]) -> None:
        healthy = 0
        for environment in queryset:
            environment = environment_probe(environment=environment)
            healthy += environment.status == Environment.Status.HEALTHY
        self.message_user(request, f"Probed {queryset.count()}; {healthy} healthy.", messages.INFO)

    @admin.action(description="Stop the containers of selected environments", permissions=["change"])
    def stop_containers(self, request: HttpRequest, queryset: QuerySet[Environment]) -> None:
        stopped: list[str] = []
        for environment in queryset.exclude(container_id=""):
            try:
                environment_container_stop(environment=environment)
            except EnvironmentRejected as exc:
                self.message_user(request, f"{environment.name}: {exc}", messages.ERROR)
            else:
                stopped.append(environment.name)
        self.message_user(
            request, f"Stopped the containers of {', '.join(stopped) or 'nothing'}.", messages.INFO
        )


@admin.register(BundledServer)
class BundledServerAdmin(admin.ModelAdmin):
    """Rows are written by webapp.catalog.bundled only: start and stop through the actions."""

    list_display = (
        "key",
        "status",
        "desired",
        "port",
        "pid",
        "capacity",
        "restarts",
        "started_at",
        "log_path",
    )
    list_filter = ("status", "desired")
    search_fields = ("key",)
    readonly_fields = (
        "key",
        "port",
        "pid",
        "desired",
        "status",
        "capacity",
        "log_path",
        "restarts",
        "last_error",
        "started_at",
        "updated_at",
    )
    actions = ("start_selected", "stop_selected")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Start selected bundled servers", permissions=["change"])
    def start_selected(self, request: HttpRequest, queryset: QuerySet[BundledServer]) -> None:
        for server in queryset:
            if server.key not in BUNDLED:
                continue
            try:
                started = bundled_start(key=server.key)
            except BundledError as exc:
                self.message_user(request, f"{server.key}: {exc}", messages.ERROR)
                continue
            if started.status == BundledServer.Status.RUNNING:
                self.message_user(
                    request, f"{started.key} runs at {started.url}.", messages.SUCCESS
                )
            else:
                first_line = (started.last_error or "no error recorded").splitlines()[0]
                self.message_user(
                    request, f"{started.key} did not start: {first_line}", messages.ERROR
                )

    @admin.action(description="Stop selected bundled servers", permissions=["change"])
    def stop_selected(self, request: HttpRequest, queryset: QuerySet[BundledServer]) -> None:
        keys = [server.key for server in queryset if server.key in BUNDLED]
        for key in keys:
            bundled_stop(key=key)
        self.message_user(request, f"Stopped {', '.join(keys) or 'nothing'}.", messages.INFO)


@admin.register(CatalogSnapshot)
class CatalogSnapshotAdmin(admin.ModelAdmin):
    """Rows are written by webapp.catalog.snapshot only: import through the catalog page or API."""

    list_display = ("name", "owner", "publisher", "format_version", "entry_count", "uploaded_at")
    list_filter = ("format_version",)
    search_fields = ("name", "publisher", "source_uri")
    list_select_related = ("owner",)
    readonly_fields = (
        "name", "owner", "uploaded_at", "format_version", "publisher", "source_uri",
        "source_revision", "digest", "entries",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="entries")
    def entry_count(self, snapshot: CatalogSnapshot) -> int:
        return len(snapshot.entries) if isinstance(snapshot.entries, list) else 0
