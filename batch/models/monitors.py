"""Monitors: a URL read again every so often for its caller, and the changes those readings found
(docs/api.md, "Monitors"; docs/workers.md, "Monitors").

A monitor is due when ``due_at`` has come; paused, it has no ``due_at`` and says why. A worker
claims a due monitor by moving ``due_at`` to the end of the run's lease (a conditional update),
and the run's end moves it to the next time, so ``due_at`` is both the schedule and the lease.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from batch.models.coordination import SingleRowLock
from batch.models.jobs import ApiKey, new_job_id

# A monitor's change as its webhook's event type (docs/webhooks.md).
MONITOR_CHANGED = "monitor.changed"


class Monitor(models.Model):
    id = models.CharField(max_length=32, primary_key=True, default=new_job_id, editable=False)
    # No index of its own: the index below leads with the caller and serves its lookups.
    caller = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="monitors", db_index=False)
    url = models.TextField()
    # The target's options as validated at creation; every run reads with changes: true.
    options = models.JSONField(default=dict)
    every = models.PositiveIntegerField(help_text="seconds between two runs")
    callback_url = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()
    # The next run, or the end of the lease of the run in flight; null while paused.
    due_at = models.DateTimeField(null=True, blank=True)
    paused_reason = models.TextField(blank=True, default="")
    runs = models.PositiveIntegerField(default=0)
    failures_in_a_row = models.PositiveSmallIntegerField(default=0)
    last_run_at = models.DateTimeField(null=True, blank=True)
    # "ok", or the outcome of the last run's failure (an outcome of the table).
    last_outcome = models.CharField(max_length=32, blank=True, default="")
    last_error = models.TextField(blank=True, default="")
    last_change_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["caller", "-created_at"], name="monitor_caller_newest"),
            models.Index(fields=["due_at"], name="monitor_due"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(every__gt=0), name="monitor_every_positive"),
            models.CheckConstraint(
                condition=Q(due_at__isnull=False) | ~Q(paused_reason=""), name="monitor_due_or_paused"
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def paused(self) -> bool:
        return self.due_at is None


class MonitorLock(SingleRowLock):
    """Every monitor creation holds it, so that ``SIFT_MONITORS_TOTAL`` holds under concurrency."""


class MonitorChange(models.Model):
    """A run that found the page changed since the monitor's last reading: the diff, as answered."""

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="changes", db_index=False)
    at = models.DateTimeField()
    previous_at = models.DateTimeField(null=True, blank=True)
    diff = models.TextField()
    added = models.PositiveIntegerField(default=0)
    removed = models.PositiveIntegerField(default=0)
    diff_truncated = models.BooleanField(default=False)
    n_bytes = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["monitor", "-at"], name="monitor_change_newest")]

    def __str__(self) -> str:
        return f"{self.monitor_id} at {self.at:%Y-%m-%d %H:%M:%S}"
