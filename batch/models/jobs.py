"""Callers, jobs and targets, and the idempotency keys of submits (docs/api.md, docs/workers.md).

The database constraints make impossible states impossible: a status outside its set, two
targets at one index, counters that disagree, a finished job without ``finished_at``.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from fetch.outcomes import Outcome


def new_job_id() -> str:
    return secrets.token_hex(16)


# What ``new_job_id`` makes: the API refuses any other job id before it reaches the database.
JOB_ID_PATTERN = r"^[0-9a-f]{32}$"
# The largest value an integer column holds: a bound for indexes and offsets the API accepts.
MAX_DB_INT = 2**31 - 1


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


WEBHOOK_SECRET_PREFIX = "whsec_"  # noqa: S105 - the format's prefix, not a secret


def new_webhook_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 32 random bytes in base64 (docs/webhooks.md)."""
    return WEBHOOK_SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


# Every choice's label is its code: operators compare the admin with API answers and log lines.


class CallerClass(models.TextChoices):
    FLEET = "fleet", "fleet"
    RESTRICTED = "restricted", "restricted"


class ApiKey(models.Model):
    """A caller. Only the SHA-256 of its key is stored; the key is shown once, at creation."""

    name = models.CharField(max_length=100, unique=True)
    workspace = models.CharField(max_length=100, blank=True, default="")
    caller_class = models.CharField(max_length=16, choices=CallerClass.choices, default=CallerClass.FLEET)
    key_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Signs this caller's webhooks, so it is kept as it is; shown once, at creation or rotation.
    webhook_secret = models.CharField(max_length=100, default=new_webhook_secret, editable=False)
    # When a worker last ran one of this caller's monitors: its turn in the round-robin, shared
    # with its batch jobs' (docs/workers.md, "Monitors").
    monitors_served_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = "API key"
        constraints = [
            models.CheckConstraint(
                condition=Q(caller_class__in=CallerClass.values), name="apikey_caller_class_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def issue(
        cls, name: str, *, workspace: str = "", caller_class: str = CallerClass.FLEET
    ) -> tuple[ApiKey, str]:
        """Create a caller and return it with its key, which is never stored."""
        raw_key = "sk_" + secrets.token_urlsafe(32)
        api_key = cls.objects.create(
            name=name, workspace=workspace, caller_class=caller_class, key_sha256=hash_key(raw_key)
        )
        return api_key, raw_key

    def rotate_webhook_secret(self) -> str:
        """Replace the webhook secret; the new one signs every attempt from now on."""
        self.webhook_secret = new_webhook_secret()
        ApiKey.objects.filter(pk=self.pk).update(webhook_secret=self.webhook_secret)
        return self.webhook_secret


class JobStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    PARTIAL = "partial", "partial"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


LIVE_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING)
FINISHED_STATUSES = (JobStatus.DONE, JobStatus.PARTIAL, JobStatus.FAILED, JobStatus.CANCELLED)
# A job with one of these statuses answers a repeated submit with the same targets.
REUSABLE_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.DONE, JobStatus.PARTIAL)


class TargetStatus(models.TextChoices):
    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


# A target's outcome, from the one table of outcomes; the label of each is its code too.
OUTCOME_CHOICES = [(outcome.value, outcome.value) for outcome in Outcome]


class BatchJob(models.Model):
    id = models.CharField(max_length=32, primary_key=True, default=new_job_id, editable=False)
    # No index of its own: the indexes below lead with the caller and serve its lookups.
    caller = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="jobs", db_index=False)
    caller_class = models.CharField(max_length=16, choices=CallerClass.choices)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    error = models.TextField(blank=True, default="")
    targets_total = models.PositiveIntegerField()
    targets_done = models.PositiveIntegerField(default=0)
    targets_failed = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    # When its owner last read it (or submitted it): the job lives until this plus SIFT_BATCH_TTL.
    last_read_at = models.DateTimeField()
    n_bytes = models.BigIntegerField(default=0)
    # SHA-256 of the caller and the request (targets, callback URL): finds a twin to reuse.
    content_key = models.CharField(max_length=64)
    # When a worker last took a target of this job: the round-robin turn (docs/workers.md).
    served_at = models.DateTimeField(null=True, blank=True)
    # Where the finished job's summary is POSTed, signed (docs/webhooks.md); "" for none.
    callback_url = models.TextField(blank=True, default="")

    class Meta:
        verbose_name = "batch job"
        permissions = [("cancel_batchjob", "Can cancel batch jobs")]
        indexes = [
            models.Index(fields=["caller", "status"], name="job_caller_status"),
            models.Index(fields=["caller", "content_key"], name="job_caller_content"),
            models.Index(fields=["caller", "-created_at"], name="job_caller_newest"),
            models.Index(fields=["status", "created_at"], name="job_status_created"),
            models.Index(fields=["last_read_at"], name="job_last_read"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=JobStatus.values), name="job_status_valid"),
            models.CheckConstraint(
                condition=Q(caller_class__in=CallerClass.values), name="job_caller_class_valid"
            ),
            models.CheckConstraint(
                condition=Q(targets_failed__lte=F("targets_done"), targets_done__lte=F("targets_total")),
                name="job_counters_consistent",
            ),
            models.CheckConstraint(
                condition=Q(status__in=LIVE_STATUSES, finished_at__isnull=True)
                | Q(status__in=FINISHED_STATUSES, finished_at__isnull=False),
                name="job_finished_at_iff_finished",
            ),
            models.CheckConstraint(condition=Q(n_bytes__gte=0), name="job_n_bytes_non_negative"),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def expires_at(self) -> datetime:
        return self.last_read_at + timedelta(seconds=settings.SIFT_BATCH_TTL)

    @property
    def is_live(self) -> bool:
        return self.status in LIVE_STATUSES


class IdempotencyKey(models.Model):
    """An ``Idempotency-Key`` header a caller sent with a submit, and the job it answered.

    Deleted with its job (sweep, eviction), which frees the key again (docs/api.md).
    """

    caller = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    # SHA-256 of the request the key was first sent with: normalised targets and callback URL.
    request_sha256 = models.CharField(max_length=64)
    job = models.ForeignKey(BatchJob, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = "idempotency key"
        constraints = [
            models.UniqueConstraint(fields=["caller", "key"], name="idempotencykey_one_per_caller")
        ]

    def __str__(self) -> str:
        return self.key


class BatchTarget(models.Model):
    # No index of its own: the index and the constraint below lead with the job and serve its
    # lookups; every claim and store changes indexed columns and so writes to every index.
    job = models.ForeignKey(BatchJob, on_delete=models.CASCADE, related_name="targets", db_index=False)
    idx = models.PositiveIntegerField()
    url = models.TextField()
    options = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=TargetStatus.choices, default=TargetStatus.PENDING)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    hint = models.TextField(blank=True, default="")
    # NULL, not "", is "no outcome": the constraints below test it with IS NULL.
    outcome = models.CharField(max_length=32, choices=OUTCOME_CHOICES, null=True, blank=True)  # noqa: DJ001
    attempts = models.PositiveIntegerField(default=0)
    # Claims whose lease ran out before the worker stored anything: a worker died.
    lost_leases = models.PositiveSmallIntegerField(default=0)
    n_bytes = models.BigIntegerField(default=0)
    # Scheduling state (docs/workers.md): a busy target waits until ``not_before``; a claimed one
    # belongs to its worker until ``lease_until``; ``busy_since`` starts the RETRY_FOR clock.
    not_before = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    busy_since = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The target's place among its job's ended targets (1, 2, ...), set in the transaction that
    # stores its end, from the job's ``targets_done`` counted in the same transaction.
    seq = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        verbose_name = "batch target"
        ordering = ["job", "idx"]
        indexes = [
            models.Index(fields=["job", "status", "idx"], name="target_job_status_idx"),
            models.Index(fields=["status", "lease_until"], name="target_status_lease"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["job", "idx"], name="target_one_per_job_idx"),
            models.UniqueConstraint(fields=["job", "seq"], name="target_one_per_job_seq"),
            models.CheckConstraint(condition=Q(status__in=TargetStatus.values), name="target_status_valid"),
            models.CheckConstraint(
                condition=Q(outcome__isnull=True) | Q(outcome__in=[o.value for o in Outcome]),
                name="target_outcome_valid",
            ),
            models.CheckConstraint(
                condition=~Q(status=TargetStatus.DONE) | Q(result__isnull=False, outcome__isnull=True),
                name="target_done_has_result",
            ),
            models.CheckConstraint(
                condition=~Q(status=TargetStatus.FAILED) | Q(outcome__isnull=False),
                name="target_failed_has_outcome",
            ),
            models.CheckConstraint(
                condition=~Q(status=TargetStatus.RUNNING) | Q(lease_until__isnull=False),
                name="target_running_has_lease",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id}/{self.idx}"
