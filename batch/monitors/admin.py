"""The staff console's monitors (docs/admin.md): each with its last run and last change, its kept
changes, and the pause and resume actions, which call the monitors service as the API would.
Registered by ``batch.apps`` once the app registry is ready."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from batch.models import Monitor, MonitorChange
from batch.monitors import service

PAUSED_BY_STAFF = "paused by staff in the admin"


class MonitorChangeInline(admin.TabularInline):
    model = MonitorChange
    fields = ["at", "added", "removed", "diff_truncated", "diff"]
    readonly_fields = ["at", "added", "removed", "diff_truncated", "diff"]
    ordering = ["-at", "-pk"]
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Monitor)
class MonitorAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "caller",
        "url",
        "every",
        "state",
        "due_at",
        "runs",
        "last_run_at",
        "last_outcome",
        "failures_in_a_row",
        "last_change_at",
    ]
    list_filter = ["caller", "last_outcome"]
    search_fields = ["id", "url"]
    list_select_related = ["caller"]
    readonly_fields = [f.name for f in Monitor._meta.fields]
    inlines = [MonitorChangeInline]
    actions = ["pause_selected", "resume_selected"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="state")
    def state(self, monitor: Monitor) -> str:
        return f"paused: {monitor.paused_reason}" if monitor.paused else "running"

    @admin.action(description="Pause selected monitors", permissions=["change"])
    def pause_selected(self, request: HttpRequest, queryset: QuerySet[Monitor]) -> None:
        paused = service.pause(queryset, PAUSED_BY_STAFF)
        self.message_user(request, f"Paused {paused} monitor(s).", messages.SUCCESS)

    @admin.action(description="Resume selected monitors", permissions=["change"])
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[Monitor]) -> None:
        resumed = service.resume(queryset)
        self.message_user(request, f"Resumed {resumed} monitor(s); each runs at once.", messages.SUCCESS)
