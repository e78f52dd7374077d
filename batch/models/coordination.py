"""The rows that coordinate processes across the deployment: one-row locks that serialise a
count (submits, stream admissions), the two worker slots, cluster heartbeats and open event
streams (docs/workers.md, docs/api.md)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from batch.models.jobs import ApiKey, BatchTarget


class SingleRowLock(models.Model):
    """A table of one row that a transaction locks to serialise a deployment-wide count: whoever
    counts under it sees every row committed by those that held it before. Made on first use. On
    SQLite the transaction (``IMMEDIATE``, settings) holds the one write lock already."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)

    class Meta:
        abstract = True
        constraints = [models.CheckConstraint(condition=Q(id=1), name="%(class)s_single_row")]

    def __str__(self) -> str:
        return str(self._meta.verbose_name)

    @classmethod
    def hold(cls) -> None:
        """Lock the row until the transaction ends, making it first if it is not there yet."""
        rows = cls._default_manager
        lock = rows.select_for_update().filter(pk=1).values_list("pk")
        if lock.first() is None:
            rows.bulk_create([cls(id=1)], ignore_conflicts=True)
            lock.get()


class SubmitLock(SingleRowLock):
    """Every submit that may create a job holds it, so ``JOBS_TOTAL`` holds under concurrency:
    two submits can never both see room for one more job (docs/decisions.md, "One lock for the
    total cap")."""


class WorkerSlot(models.Model):
    """One of the ``WORKERS`` places a target can be fetched in, deployment-wide (docs/workers.md).

    A worker owns a slot by writing its target into it under a row lock; a slot whose lease
    ran out belonged to a dead worker and is free again.
    """

    number = models.PositiveSmallIntegerField(primary_key=True)
    target = models.ForeignKey(
        BatchTarget, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Or the monitor whose run holds it (docs/workers.md, "Monitors"); never both.
    monitor = models.ForeignKey(
        "batch.Monitor", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(number__lt=2), name="workerslot_at_most_two")]

    def __str__(self) -> str:
        return f"slot {self.number}"


class ClusterHeartbeat(models.Model):
    """Written by every live cluster worker process; ``/healthz`` reads it."""

    name = models.CharField(max_length=200, unique=True)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.name


class EventStream(models.Model):
    """An open event stream (``GET /v1/batch/{id}/events``): the stream bounds count these rows,
    so they hold for the whole deployment (``doors/stream_bounds.py``). Its web process renews
    ``lease_until`` while the stream is open and deletes the row when it ends; a row whose lease
    ran out was left by a process that died, and no longer counts."""

    # No index of its own: the index below leads with the caller and serves its counts.
    caller = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+", db_index=False)
    # The job it follows; not a foreign key: a job swept under its stream ends the stream itself.
    job_id = models.CharField(max_length=32)
    opened_at = models.DateTimeField()
    lease_until = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["caller", "lease_until"], name="stream_caller_lease"),
            models.Index(fields=["lease_until"], name="stream_lease"),
        ]

    def __str__(self) -> str:
        return f"stream {self.pk} of {self.job_id}"


class StreamLock(SingleRowLock):
    """Every stream admission holds it, so that the open streams it counts, the caller's and in
    all, are never stale."""
