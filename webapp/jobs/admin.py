from django.contrib import admin

from webapp.jobs.models import Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "owner", "status", "progress_done", "progress_total", "created_at")
    list_filter = ("kind", "status")
    readonly_fields = tuple(field.name for field in Job._meta.fields)

    def has_add_permission(self, request: object) -> bool:
        return False
