from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from webapp.core.admin import ReadOnlyTabularInline
from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent, WorkerHeartbeat
from webapp.runs.selectors import run_alerts, run_status_display, runs_with_alerts
from webapp.runs.services import run_request_cancel

# Shown, and all read-only (one name: admin's fields and readonly_fields have different types).
_EVENT_FIELDS = ("created_at", "kind", "message")


class RunEventInline(ReadOnlyTabularInline):
    model = RunEvent
    fields = _EVENT_FIELDS
    readonly_fields = _EVENT_FIELDS
    ordering = ("-created_at", "-id")
    show_change_link = True


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "name",
        "owner",
        "health_status",
        "health_alerts",
        "progress",
        "model",
        "worker_name",
        "attempts",
        "created_at",
    )
    list_display_links = ("id", "name")
    list_filter = ("status", "cancel_requested")
    search_fields = ("name", "model", "owner__username")
    list_select_related = ("owner",)
    date_hierarchy = "created_at"
    readonly_fields = (
        "status",
        "step",
        "last_seq",
        "lease_owner",
        "heartbeat_at",
        "worker_name",
        "attempts",
        "checkpoint_step",
        "cancel_requested",
        "created_at",
        "started_at",
        "finished_at",
    )
    filter_horizontal = ("environments",)
    inlines = (RunEventInline,)
    actions = ("cancel_selected",)

    @admin.display(description="step", ordering="step")
    def progress(self, run: Run) -> str:
        return f"{run.step}/{run.max_steps}"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        return runs_with_alerts(super().get_queryset(request))

    @admin.display(description="status", ordering="status")
    def health_status(self, run: Run) -> str:
        return run_status_display(run=run)

    @admin.display(description="active alerts")
    def health_alerts(self, run: Run) -> str:
        return ", ".join(alert["kind"] for alert in run_alerts(run=run) if alert["active"]) or "—"

    @admin.action(description="Cancel selected runs", permissions=["change"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        stopped = requested = 0
        for run in queryset:
            if run.status not in Run.ACTIVE:
                continue
            run = run_request_cancel(run=run)
            if run.status == Run.Status.CANCELLED:
                stopped += 1
            elif run.cancel_requested:
                requested += 1
        self.message_user(
            request,
            f"{stopped} queued run(s) cancelled; cancel requested for {requested} running run(s).",
            messages.SUCCESS,
        )


@admin.register(MetricPoint)
class MetricPointAdmin(admin.ModelAdmin):
    list_display = ("run", "step", "key", "value", "seq")
    list_filter = ("key",)
    search_fields = ("key", "run__name", "=run__id")
    list_select_related = ("run",)
    ordering = ("-run_id", "step", "key")
    raw_id_fields = ("run",)


@admin.register(Rollout)
class RolloutAdmin(admin.ModelAdmin):
    """Read only: transcripts are what the model did; nobody edits them."""

    list_display = ("run", "seq", "step", "env", "reward", "advantage", "created_at")
    list_filter = ("env",)
    search_fields = ("run__name", "=run__id", "env")
    list_select_related = ("run",)
    ordering = ("-run_id", "-seq")

    def get_readonly_fields(self, request: HttpRequest, obj: Rollout | None = None) -> list[str]:
        return [field.name for field in Rollout._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Rollout | None = None) -> bool:
        return False


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "run", "kind", "message")
    list_filter = ("kind",)
    search_fields = ("message", "run__name", "=run__id")
    list_select_related = ("run",)
    readonly_fields = ("created_at",)
    raw_id_fields = ("run",)


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ("name", "heartbeat_at", "current_run", "cuda_devices", "vllm")
    search_fields = ("name",)
    list_select_related = ("current_run",)
    raw_id_fields = ("current_run",)

    @admin.display(description="CUDA devices")
    def cuda_devices(self, worker: WorkerHeartbeat) -> str:
        capabilities = worker.capabilities if isinstance(worker.capabilities, dict) else {}
        return str(capabilities.get("cuda_devices", "—"))

    @admin.display(description="vLLM", boolean=True)
    def vllm(self, worker: WorkerHeartbeat) -> bool | None:
        capabilities = worker.capabilities if isinstance(worker.capabilities, dict) else {}
        value = capabilities.get("vllm")
        return None if value is None else bool(value)
