from __future__ import annotations

from django.contrib import admin

from webapp.evaluations.models import Evaluation


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "environment_name",
        "owner",
        "status",
        "done",
        "total",
        "episodes",
        "seed",
        "created_at",
    )
    list_filter = ("status",)
    search_fields = ("environment_name", "owner__username")
    # Transcripts are read on the evaluation's page; the admin edits nothing a worker writes.
    readonly_fields = (
        "owner",
        "environment",
        "environment_name",
        "environment_key",
        "prompt",
        "model_specs",
        "episodes",
        "seed",
        "settings",
        "source_run",
        "status",
        "done",
        "total",
        "error",
        "cancel_requested",
        "lease_owner",
        "claim_task_id",
        "heartbeat_at",
        "worker_name",
        "attempts",
        "created_at",
        "started_at",
        "finished_at",
    )

    def has_add_permission(self, request: object) -> bool:
        return False
