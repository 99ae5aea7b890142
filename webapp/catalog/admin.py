from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from webapp.catalog.models import Environment
from webapp.catalog.services import environment_probe


@admin.register(Environment)
class EnvironmentAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "kind",
        "status",
        "base_url",
        "capacity",
        "tool_names",
        "owner",
        "checked_at",
    ]
    list_filter = ["kind", "status"]
    search_fields = ["name", "base_url"]
    list_select_related = ["owner"]
    readonly_fields = ["checked_at", "created_at"]
    actions = ["probe_selected"]

    @admin.display(description="tools")
    def tool_names(self, environment: Environment) -> str:
        tools = environment.tools if isinstance(environment.tools, list) else []
        return ", ".join(str(t.get("name", "")) for t in tools if isinstance(t, dict))

    @admin.action(description="Probe selected environments")
    def probe_selected(self, request: HttpRequest, queryset: QuerySet[Environment]) -> None:
        healthy = 0
        for environment in queryset:
            environment = environment_probe(environment=environment)
            healthy += environment.status == Environment.Status.HEALTHY
        self.message_user(request, f"Probed {queryset.count()}; {healthy} healthy.", messages.INFO)
