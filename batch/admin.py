"""The staff console (docs/admin.md): jobs and their targets read-only, cancel and delete, API keys.

Nothing here changes a job's state by itself: cancelling goes through ``jobs.cancel``, the
function ``DELETE /v1/batch/{id}`` uses, and keys are issued by ``ApiKey.issue``, as the
``create_api_key`` command does. A key's webhook secret is shown on the page that creates it
and on the page that rotates it, and nowhere else (docs/webhooks.md).
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import display_for_value, flatten_fieldsets
from django.contrib.auth import get_permission_codename
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.defaultfilters import filesizeformat
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from batch import jobs
from batch.models import ApiKey, BatchJob, BatchTarget, TargetStatus, WebhookDelivery
from batch.summaries import webhook_state
from batch.webhooks import signing

admin.site.site_header = "sift console"
admin.site.site_title = "sift console"
admin.site.index_title = "Jobs, targets and API keys"

# Long pages and JSON wrap instead of stretching the admin sideways.
PRE_STYLE = "white-space: pre-wrap; overflow-wrap: anywhere; max-height: 60em; overflow: auto; margin: 0"
# The report names at most this many already-finished jobs; the count is always exact.
REPORT_MAX_IDS = 10
# Set on the request by ``ApiKeyAdmin.save_model`` for ``response_add``: the key lives nowhere else.
ISSUED_KEY_ATTR = "sift_issued_key"


def _can_view_jobs(request: HttpRequest) -> bool:
    return request.user.has_perm("batch.view_batchjob")


def _pre(text: str) -> SafeString:
    return format_html('<pre style="{}">{}</pre>', PRE_STYLE, text)


def _pretty_json(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _result_size(target: BatchTarget) -> str:
    return filesizeformat(target.n_bytes) if target.status == TargetStatus.DONE else "-"


def _page(
    model_admin: admin.ModelAdmin, request: HttpRequest, template: str, title: str, **context: Any
) -> TemplateResponse:
    """One of the console's own pages (a confirmation, a key shown once), in the admin's frame."""
    frame = {**model_admin.admin_site.each_context(request), "title": title, "subtitle": None}
    frame |= {"opts": model_admin.opts, "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME}
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, template, frame | {"media": model_admin.media} | context)


# --- jobs ------------------------------------------------------------------------------------


class TargetsFollowTheirJob:
    """Targets are never added, edited or deleted by hand (a target goes with its job), and
    whoever may view jobs may view their targets."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _can_view_jobs(request) or super().has_view_permission(request, obj)  # type: ignore[misc]


class TargetInline(TargetsFollowTheirJob, admin.TabularInline):
    """A job's targets, read-only; each row links to the target's page with its full result."""

    model = BatchTarget
    fields = (
        "target",
        "url_start",
        "status",
        "outcome",
        "attempts",
        "error",
        "hint",
        "result_size",
    )
    readonly_fields = fields
    ordering = ["idx"]
    extra = 0
    can_delete = False
    verbose_name_plural = "targets"

    def get_queryset(self, request: HttpRequest) -> QuerySet[BatchTarget]:
        # Results can be hundreds of KB each; the table only needs their size.
        return super().get_queryset(request).defer("result")

    @admin.display(description="idx")
    def target(self, target: BatchTarget) -> str:
        url = reverse("admin:batch_batchtarget_change", args=[target.pk])
        return format_html('<a href="{}">{}</a>', url, target.idx)

    @admin.display(description="URL")
    def url_start(self, target: BatchTarget) -> str:
        return Truncator(target.url).chars(80)

    @admin.display(description="result size")
    def result_size(self, target: BatchTarget) -> str:
        return _result_size(target)


class WebhookDeliveryInline(TargetsFollowTheirJob, admin.TabularInline):
    """The job's webhook deliveries (its ``batch.finished`` event), each with every POST: when,
    and the receiver's status or why none came."""

    model = WebhookDelivery
    fields = ("event_id", "event_type", "state", "due_at", "attempt_list")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookDelivery]:
        return super().get_queryset(request).prefetch_related("attempts")

    @admin.display(description="attempts")
    def attempt_list(self, delivery: WebhookDelivery) -> str:
        row = '<tr class="webhook-attempt"><td>{}</td><td>{}</td><td>{}</td></tr>'
        tried = [(display_for_value(a.at, ""), a.status or "-", a.error) for a in delivery.attempts.all()]
        return format_html("<table>{}</table>", format_html_join("", row, tried)) if tried else "-"


@admin.register(BatchJob)
class BatchJobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "caller_name",
        "caller_class",
        "status",
        "progress",
        "created_at",
        "expires",
    ]
    list_filter = ["status", "caller_class", "caller"]
    search_fields = ["^id", "caller__name"]
    search_help_text = "A job id (or its first characters) or a caller name."
    list_select_related = ["caller"]
    ordering = ["-created_at", "-id"]
    actions = ["cancel_selected"]
    inlines = [TargetInline, WebhookDeliveryInline]
    fieldsets = [
        (None, {"fields": ["id", "caller", "caller_class", "status", "error"]}),
        (
            "Progress",
            {"fields": ["progress", "targets_total", "targets_done", "targets_failed", "result_bytes"]},
        ),
        ("Times", {"fields": ["created_at", "finished_at", "last_read_at", "expires", "served_at"]}),
        ("Webhook", {"fields": ["callback_url", "webhook_delivery"]}),
        ("Reuse", {"fields": ["content_key"], "classes": ["collapse"]}),
    ]
    readonly_fields = flatten_fieldsets(fieldsets)
    cancel_confirmation_template = "admin/batch/batchjob/cancel_selected_confirmation.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[BatchJob]:
        return super().get_queryset(request).select_related("caller")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # Targets go with their job and have no delete permission of their own to lack.
        deletable, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(BatchTarget._meta.verbose_name)
        return deletable, model_count, perms_needed, protected

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        codename = get_permission_codename("cancel", self.opts)
        return request.user.has_perm(f"{self.opts.app_label}.{codename}")

    @admin.display(description="caller", ordering="caller__name")
    def caller_name(self, job: BatchJob) -> str:
        return job.caller.name

    @admin.display(description="progress", ordering="targets_done")
    def progress(self, job: BatchJob) -> str:
        failed = format_html(", {} failed", job.targets_failed) if job.targets_failed else ""
        return format_html(
            '<span style="white-space: nowrap"><progress max="{}" value="{}" style="width: 5em; '
            'vertical-align: middle"></progress> {}/{}{}</span>',
            max(job.targets_total, 1),
            job.targets_done,
            job.targets_done,
            job.targets_total,
            failed,
        )

    @admin.display(description="stored result bytes")
    def result_bytes(self, job: BatchJob) -> str:
        return filesizeformat(job.n_bytes)

    @admin.display(description="delivery")
    def webhook_delivery(self, job: BatchJob) -> str:
        state = webhook_state(job)
        if state is None:
            return "-"
        when = state["delivered_at"] or state["next_attempt_at"]
        at = f" at {display_for_value(when, '')}" if when and state["state"] != "failed" else ""
        return f"{state['state']}{at}, {len(state['attempts'])} attempt(s)"

    @admin.display(description="expires", ordering="last_read_at")
    def expires(self, job: BatchJob) -> str:
        # expires_at is last_read_at + TTL, not a column, so last_read_at sorts it.
        return display_for_value(job.expires_at, self.get_empty_value_display())

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[BatchJob]) -> HttpResponse | None:
        """Show what would be cancelled; on confirmation cancel each job as the API does."""
        if request.POST.get("post") != "yes":
            return self._cancel_confirmation(request, list(queryset))
        cancelled, finished = [], []
        for job in queryset:
            if jobs.cancel(job):
                cancelled.append(job)
                self.log_change(request, job, "Cancelled.")
            else:
                finished.append(job)
        level = messages.SUCCESS if cancelled else messages.WARNING
        self.message_user(request, cancel_report(len(cancelled), finished), level)
        return None

    def _cancel_confirmation(self, request: HttpRequest, jobs: list[BatchJob]) -> TemplateResponse:
        live = [job for job in jobs if job.is_live]
        finished = [job for job in jobs if not job.is_live]
        template = self.cancel_confirmation_template
        return _page(
            self, request, template, "Cancel batch jobs", jobs=jobs, live_jobs=live, finished_jobs=finished
        )


def cancel_report(n_cancelled: int, finished: list[BatchJob]) -> str:
    """``"2 cancelled, 1 already finished: <id> (done)"``, naming the jobs that were left alone."""
    report = f"{n_cancelled} cancelled, {len(finished)} already finished"
    if not finished:
        return report
    named = ", ".join(f"{job.id} ({job.status})" for job in finished[:REPORT_MAX_IDS])
    more = f" and {len(finished) - REPORT_MAX_IDS} more" if len(finished) > REPORT_MAX_IDS else ""
    return f"{report}: {named}{more}"


# --- targets ---------------------------------------------------------------------------------


@admin.register(BatchTarget)
class BatchTargetAdmin(TargetsFollowTheirJob, admin.ModelAdmin):
    """One target with its full result; fetched text is always escaped, never rendered."""

    list_display = ["__str__", "status", "outcome", "attempts", "result_size"]
    list_filter = ["status", "outcome"]
    search_fields = ["=job__id"]
    search_help_text = "A whole job id."
    fieldsets = [
        (None, {"fields": ["job", "idx", "target_url", "options_json", "status"]}),
        ("Outcome", {"fields": ["outcome", "error", "hint", "attempts", "lost_leases"]}),
        ("Result", {"fields": ["result_size", "content", "meta"]}),
        (
            "Scheduling",
            {
                "fields": ["started_at", "finished_at", "not_before", "busy_since", "lease_until"],
                "classes": ["collapse"],
            },
        ),
    ]
    readonly_fields = flatten_fieldsets(fieldsets)

    def get_queryset(self, request: HttpRequest) -> QuerySet[BatchTarget]:
        # The list must not load every result; the target page loads its own with one query.
        return super().get_queryset(request).select_related("job").defer("result")

    @admin.display(description="URL")
    def target_url(self, target: BatchTarget) -> str:
        # Text, not a link: an operator should not open a fetched URL by a stray click.
        return target.url

    @admin.display(description="options")
    def options_json(self, target: BatchTarget) -> str:
        return _pre(_pretty_json(target.options)) if target.options else "(defaults)"

    @admin.display(description="result size")
    def result_size(self, target: BatchTarget) -> str:
        return _result_size(target)

    @admin.display(description="content")
    def content(self, target: BatchTarget) -> str:
        result = target.result
        if not isinstance(result, dict):
            return "-" if result is None else _pre(_pretty_json(result))
        content = result.get("content")
        return _pre(content if isinstance(content, str) else _pretty_json(content))

    @admin.display(description="meta")
    def meta(self, target: BatchTarget) -> str:
        result = target.result
        if not isinstance(result, dict):
            return "-"
        return _pre(_pretty_json(result.get("meta", {})))


# --- API keys --------------------------------------------------------------------------------


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Callers. A new key is shown once, on the page that answers the create form."""

    list_display = ["name", "workspace", "caller_class", "active", "created_at", "last_used_at"]
    list_filter = ["active", "caller_class"]
    search_fields = ["name", "workspace"]
    ordering = ["name"]
    actions = ["revoke_selected", "rotate_webhook_secrets"]
    add_fields = ("name", "workspace", "caller_class")
    change_fields = (*add_fields, "active", "key_sha256", "created_at", "updated_at", "last_used_at")
    # The name is the caller's identity in logs and idempotency keys; a revoked key stays revoked.
    change_readonly_fields = ("name", "active", "key_sha256", "created_at", "updated_at", "last_used_at")
    key_created_template = "admin/batch/apikey/key_created.html"
    rotate_confirmation_template = "admin/batch/apikey/rotate_confirmation.html"
    secrets_rotated_template = "admin/batch/apikey/secrets_rotated.html"

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return self.add_fields if obj is None else self.change_fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return () if obj is None else self.change_readonly_fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Deleting a caller would delete its jobs and its history; revoking is the way out.
        return False

    def save_model(self, request: HttpRequest, obj: ApiKey, form: ModelForm, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        issued, raw_key = ApiKey.issue(obj.name, workspace=obj.workspace, caller_class=obj.caller_class)
        obj.pk = issued.pk
        obj.refresh_from_db()
        setattr(request, ISSUED_KEY_ATTR, raw_key)

    def response_add(
        self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None
    ) -> HttpResponse:
        raw_key = getattr(request, ISSUED_KEY_ATTR, None)
        if raw_key is None:
            return super().response_add(request, obj, post_url_continue)
        context = {"api_key": obj, "raw_key": raw_key, "webhook_secret": obj.webhook_secret}
        return _page(self, request, self.key_created_template, "API key created", **context)

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        selected = list(queryset)
        active = [api_key for api_key in selected if api_key.active]
        # A conditional update: a key revoked meanwhile by someone else is not counted twice.
        revoked = ApiKey.objects.filter(pk__in=[k.pk for k in active], active=True).update(
            active=False, updated_at=timezone.now()
        )
        for api_key in active:
            self.log_change(request, api_key, "Revoked.")
        self.message_user(
            request, f"{revoked} revoked, {len(selected) - revoked} already revoked", messages.SUCCESS
        )

    @admin.action(description="Rotate the webhook secret of selected keys", permissions=["change"])
    def rotate_webhook_secrets(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> TemplateResponse:
        """Confirm, then give each key a new secret and show the new secrets, this once."""
        keys = list(queryset.order_by("name"))
        confirmed = request.POST.get("post") == "yes"
        rotated = [(key, signing.rotate_secret(key)) for key in keys] if confirmed else []
        for key, _ in rotated:
            self.log_change(request, key, "Rotated the webhook secret.")
        title = "Webhook secrets rotated" if confirmed else "Rotate webhook secrets"
        template = self.secrets_rotated_template if confirmed else self.rotate_confirmation_template
        return _page(self, request, template, title, keys=keys, rotated=rotated)
