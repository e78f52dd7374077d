"""The job lifecycle: submit, read, cancel, sweep and evict (docs/workers.md, docs/api.md).

Nothing here knows about HTTP or the fetch pipeline: targets arrive parsed and validated
(``batch/api/validation.py``). Every state change is a conditional UPDATE or happens under row
locks inside a short transaction, so concurrent web and worker processes never decide on a
stale read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, QuerySet, Sum
from django.utils import timezone

from batch import metrics, wakeups, webhooks
from batch.errors import Refusal, Refused
from batch.fetch.outcomes import RetryAfter
from batch.fetch.targets import Target
from batch.models import (
    FINISHED_STATUSES,
    LIVE_STATUSES,
    REUSABLE_STATUSES,
    ApiKey,
    BatchJob,
    BatchTarget,
    JobStatus,
    SubmitLock,
)
from capacity.eviction import oldest_over_budget

log = logging.getLogger(__name__)

# Finished jobs one count eviction deletes at most; a finish adds one, so one round keeps up.
EVICT_CHUNK = 500


@dataclass(frozen=True)
class Submitted:
    job: BatchJob
    reused: bool


@dataclass(frozen=True)
class Removed:
    jobs: int = 0
    targets: int = 0
    bytes: int = 0

    def __str__(self) -> str:
        return f"removed {self.jobs} jobs, {self.targets} targets, {self.bytes} bytes"

    def __add__(self, other: Removed) -> Removed:
        return Removed(self.jobs + other.jobs, self.targets + other.targets, self.bytes + other.bytes)


def _ttl() -> timedelta:
    return timedelta(seconds=settings.SIFT_BATCH_TTL)


def idempotency_key(caller_name: str, targets: Sequence[Target], callback_url: str = "") -> str:
    """SHA-256 of caller name, NUL, and the canonical JSON of the targets (docs/api.md).

    A ``callback_url`` is part of the request: NUL and the URL follow (none without one).
    """
    canonical = json.dumps([t.to_dict() for t in targets], sort_keys=True, separators=(",", ":"))
    callback = f"\x00{callback_url}" if callback_url else ""
    return hashlib.sha256(f"{caller_name}\x00{canonical}{callback}".encode()).hexdigest()


def submit(caller: ApiKey, targets: Sequence[Target], *, callback_url: str = "") -> Submitted:
    """Store a job of validated ``targets`` for ``caller``, or answer the live twin it already has.

    ``callback_url`` has passed the fetch guard already (``batch/api/callbacks.py``).
    """
    idem_key = idempotency_key(caller.name, targets, callback_url)
    with transaction.atomic():
        # Locks are always taken in the same order, caller row then the global row, so two
        # submits can never wait on each other in a cycle. The caller row is locked FOR NO KEY
        # UPDATE: it still serialises submits, but not the FOR KEY SHARE with which a worker's
        # commit checks a job's foreign key to it, while this submit waits to touch that job.
        ApiKey.objects.select_for_update(no_key=True).filter(pk=caller.pk).first()
        now = timezone.now()
        twin = _reusable_job(caller, idem_key, now)
        if twin is not None:
            metrics.JOBS.labels("reused").inc()
            return Submitted(twin, reused=True)
        _check_caps(caller, len(targets), now)
        job = BatchJob.objects.create(
            caller=caller,
            caller_class=caller.caller_class,
            targets_total=len(targets),
            created_at=now,
            lease=now,
            idem_key=idem_key,
            callback_url=callback_url,
        )
        BatchTarget.objects.bulk_create(
            BatchTarget(job=job, idx=i, url=t.url, options=t.options.to_dict()) for i, t in enumerate(targets)
        )
        transaction.on_commit(wakeups.wake_on_submit)
    metrics.JOBS.labels("created").inc()
    log.info("job %s submitted caller=%s targets=%d", job.id, caller.name, len(targets))
    sweep_expired_jobs()
    return Submitted(job, reused=False)


def _reusable_job(caller: ApiKey, idem_key: str, now: datetime) -> BatchJob | None:
    twin = (
        BatchJob.objects.filter(
            caller=caller, idem_key=idem_key, status__in=REUSABLE_STATUSES, created_at__gte=now - _ttl()
        )
        .order_by("-created_at")
        .first()
    )
    if twin is not None:
        touch(twin, now)
    return twin


def _live_jobs(now: datetime) -> QuerySet[BatchJob]:
    # A live job past its lease is as good as swept: it must not hold a cap.
    return BatchJob.objects.filter(status__in=LIVE_STATUSES, lease__gte=now - _ttl())


def _check_caps(caller: ApiKey, n_targets: int, now: datetime) -> None:
    per_caller = settings.SIFT_BATCH_JOBS_PER_CALLER
    # Counting stops at the cap: a COUNT over a LIMIT costs the same however many jobs are live.
    if _live_jobs(now).filter(caller=caller)[:per_caller].count() >= per_caller:
        raise Refused(
            Refusal.CALLER_BUSY,
            f"you already have {settings.SIFT_BATCH_JOBS_PER_CALLER} live job(s)",
            "Wait for your live job to finish (GET /v1/batch/{id}?wait=30) or cancel it, then submit again.",
            retry_after=RetryAfter.JOBS,
        )
    _lock_submit_row()
    if _live_jobs(now)[: settings.SIFT_BATCH_JOBS_TOTAL].count() >= settings.SIFT_BATCH_JOBS_TOTAL:
        raise Refused(
            Refusal.JOBS_BUSY,
            "the service is running as many jobs as it may",
            "Submit again after Retry-After seconds.",
            retry_after=RetryAfter.JOBS,
        )


def _lock_submit_row() -> None:
    # The one row is made by a migration (batch/migrations/0002_rows_and_schedules.py).
    SubmitLock.objects.select_for_update().get(pk=1)


def get_job(caller: ApiKey, job_id: str) -> BatchJob:
    """The caller's job, touched; another caller's job is as unknown as a missing one.

    Waiting for it to finish is ``batch.waits``' job, which bounds how many requests may wait.
    """
    job = BatchJob.objects.filter(pk=job_id, caller=caller).first()
    if job is None:
        raise Refused(
            Refusal.NOT_FOUND, f"no job {job_id}", "Check the job id; jobs are deleted after their TTL."
        )
    touch(job)
    return job


def get_target(caller: ApiKey, job_id: str, idx: int) -> BatchTarget:
    target = get_job(caller, job_id).targets.filter(idx=idx).first()
    if target is None:
        raise Refused(Refusal.NOT_FOUND, f"job {job_id} has no target {idx}", "Targets are numbered from 0.")
    return target


def touch(job: BatchJob, now: datetime | None = None) -> None:
    """Bump the lease: a job its owner reads stays alive for another TTL."""
    job.lease = now or timezone.now()
    BatchJob.objects.filter(pk=job.pk).update(lease=job.lease)


def list_jobs(caller: ApiKey, *, limit: int, offset: int) -> tuple[list[BatchJob], int]:
    jobs = list(
        BatchJob.objects.filter(caller=caller).order_by("-created_at", "-pk")[offset : offset + limit]
    )
    now = timezone.now()
    BatchJob.objects.filter(pk__in=[j.pk for j in jobs]).update(lease=now)
    for job in jobs:
        job.lease = now
    return jobs, BatchJob.objects.filter(caller=caller).count()


def cancel(job: BatchJob) -> bool:
    """Cancel a live job at once; ``False`` when it had already finished.

    Pending targets stay pending and are never claimed; a target in flight finishes and its
    result is stored without changing ``cancelled``.
    """
    now = timezone.now()
    with transaction.atomic():
        changed = BatchJob.objects.filter(pk=job.pk, status__in=LIVE_STATUSES).update(
            status=JobStatus.CANCELLED, finished_at=now, lease=now
        )
        if changed:
            webhooks.job_finished(job.pk, now)
    job.refresh_from_db()
    if changed:
        metrics.JOBS.labels("cancelled").inc()
        evict_callers_oldest(job.caller_id)
        log.info(
            "job %s cancelled caller_id=%s done=%d/%d",
            job.id,
            job.caller_id,
            job.targets_done,
            job.targets_total,
        )
    return bool(changed)


def cancel_for_caller(caller: ApiKey, job_id: str) -> BatchJob:
    job = get_job(caller, job_id)
    if not cancel(job):
        raise Refused(
            Refusal.ALREADY_FINISHED,
            f"job {job.id} is already {job.status}",
            "Nothing to cancel; read its results with GET /v1/batch/{id}.",
        )
    return job


def _delete_jobs(job_ids: list[str]) -> Removed:
    if not job_ids:
        return Removed()
    jobs = BatchJob.objects.filter(pk__in=job_ids)
    with transaction.atomic():
        n_bytes = jobs.aggregate(total=Sum("n_bytes"))["total"] or 0
        _, per_model = jobs.delete()
    return Removed(
        jobs=per_model.get(BatchJob._meta.label, 0),
        targets=per_model.get(BatchTarget._meta.label, 0),
        bytes=n_bytes,
    )


def sweep_expired_jobs(now: datetime | None = None) -> Removed:
    """Delete every job whose lease is older than TTL, with its targets."""
    cutoff = (now or timezone.now()) - _ttl()
    removed = _delete_jobs(list(BatchJob.objects.filter(lease__lt=cutoff).values_list("pk", flat=True)))
    if removed.jobs:
        metrics.SWEPT.inc(removed.jobs)
        log.info("sweep %s", removed)
    return removed


def evict_oldest(max_bytes: int | None = None) -> Removed:
    """Delete the oldest finished jobs until stored result bytes fit ``max_bytes``.

    Live jobs are never evicted, even when they alone are over the budget.
    """
    budget = settings.SIFT_BATCH_MAX_BYTES if max_bytes is None else max_bytes
    finished = BatchJob.objects.filter(status__in=FINISHED_STATUSES).order_by("finished_at", "created_at")
    removed = _delete_jobs(oldest_over_budget(BatchJob.objects.all(), finished, budget))
    if removed.jobs:
        metrics.EVICTED.inc(removed.jobs)
        log.info("evict %s", removed)
    return removed


def evict_callers_oldest(caller_id: int, keep: int | None = None) -> Removed:
    """Delete the caller's finished jobs beyond its newest ``keep`` (``SIFT_BATCH_FINISHED_PER_CALLER``).

    Bounds the tables per caller as ``MAX_BYTES`` bounds them in all: failed jobs store no
    bytes, and listing them bumps their leases, so neither the sweep nor the byte budget
    would ever remove them. Newest means last finished; other callers and live jobs are never
    touched. One bounded query per call: run after each finish, the excess is a job or two.
    """
    keep = settings.SIFT_BATCH_FINISHED_PER_CALLER if keep is None else keep
    finished = BatchJob.objects.filter(caller_id=caller_id, status__in=FINISHED_STATUSES)
    newest_first = finished.order_by("-finished_at", "-created_at", "-pk")
    removed = _delete_jobs(list(newest_first.values_list("pk", flat=True)[keep : keep + EVICT_CHUNK]))
    if removed.jobs:
        metrics.EVICTED.inc(removed.jobs)
        log.info("evict caller_id=%s over %d finished jobs: %s", caller_id, keep, removed)
    return removed


def evict_every_callers_oldest(keep: int | None = None) -> Removed:
    """``evict_callers_oldest`` for every caller over the count, for the schedule and the command."""
    keep = settings.SIFT_BATCH_FINISHED_PER_CALLER if keep is None else keep
    over = (
        BatchJob.objects.filter(status__in=FINISHED_STATUSES)
        .values("caller_id")
        .annotate(finished=Count("pk"))
        .filter(finished__gt=keep)
        .values_list("caller_id", flat=True)
    )
    removed = Removed()
    for caller_id in list(over):
        while (round_ := evict_callers_oldest(caller_id, keep)).jobs:
            removed += round_
    return removed


# A worker checks the byte budget after storing this fraction of it (see ``UncheckedBytes``).
BUDGET_CHECK_SHARE = 64


class UncheckedBytes:
    """The bytes this process stored since it last checked the byte budget.

    Summing every job's bytes after each stored target would cost a query per target; instead a
    worker checks when a job of its ends and once it has stored ``1/BUDGET_CHECK_SHARE`` of the
    budget since its last check, so the budget is overshot by at most that share per worker.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0

    def check_due(self, n_bytes: int, *, job_ended: bool) -> bool:
        with self.lock:
            self.count += n_bytes
            if not job_ended and self.count * BUDGET_CHECK_SHARE < settings.SIFT_BATCH_MAX_BYTES:
                return False
            self.count = 0
            return True


UNCHECKED_BYTES = UncheckedBytes()


def evict_after_store(n_bytes: int, *, ended_for: int | None) -> Removed:
    """After a worker stored a target of ``n_bytes``; ``ended_for`` is the caller whose job the store ended.

    A job that ended adds one to its caller's finished jobs: the caller's count is checked
    then, and only then, since nothing else a store does can put a caller over it. The byte
    budget is checked when a job ends and whenever ``UNCHECKED_BYTES`` says it is due.
    """
    removed = Removed()
    if ended_for is not None:
        removed += evict_callers_oldest(ended_for)
    if UNCHECKED_BYTES.check_due(n_bytes, job_ended=ended_for is not None):
        removed += evict_oldest()
    return removed
