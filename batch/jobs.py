"""The jobs service: submit, read, list and cancel; REST and MCP both call it. Sweeping and
eviction are ``batch/retention.py``'s.

Nothing here knows about HTTP or the fetch pipeline: targets arrive parsed and validated
(``doors/validation.py``). Every state change is a conditional UPDATE or happens under row
locks inside a short transaction, so concurrent web and worker processes never decide on a
stale read (docs/workers.md, docs/api.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, QuerySet, prefetch_related_objects
from django.utils import timezone

from batch import metrics, retention, waits
from batch.engine import wakeups
from batch.errors import Refusal, Refused
from batch.models import (
    LIVE_STATUSES,
    REUSABLE_STATUSES,
    ApiKey,
    BatchJob,
    BatchTarget,
    IdempotencyKey,
    JobStatus,
    SubmitLock,
)
from batch.summaries import job_summary, target_out
from batch.webhooks import events
from fetch.outcomes import RetryAfter
from fetch.targets import Target

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Submitted:
    job: BatchJob
    reused: bool


def _ttl() -> timedelta:
    return timedelta(seconds=settings.SIFT_BATCH_TTL)


def content_key(caller_name: str, targets: Sequence[Target], callback_url: str = "") -> str:
    """SHA-256 of caller name, NUL, and the canonical JSON of the targets (docs/api.md).

    A ``callback_url`` is part of the request: NUL and the URL follow (none without one).
    """
    canonical = json.dumps([t.to_dict() for t in targets], sort_keys=True, separators=(",", ":"))
    callback = f"\x00{callback_url}" if callback_url else ""
    return hashlib.sha256(f"{caller_name}\x00{canonical}{callback}".encode()).hexdigest()


@dataclass(frozen=True)
class SubmitRequest:
    """What makes two submits "the same request" for content reuse and for an idempotency key."""

    content_key: str
    callback_url: str
    idempotency_key: str | None
    # How long ago a content twin may have been made and still answer this request.
    reuse_within: timedelta

    @property
    def sha256(self) -> str:
        # The targets (through the content key, which names the caller too) and the callback URL.
        return hashlib.sha256(f"{self.content_key}\x00{self.callback_url}".encode()).hexdigest()


def submit(
    caller: ApiKey,
    targets: Sequence[Target],
    *,
    callback_url: str = "",
    idempotency_key: str | None = None,
) -> Submitted:
    """Store a job of validated ``targets`` for ``caller``, or answer the twin it already has.

    ``callback_url`` has passed the fetch guard already (``doors/callbacks.py``). Everything
    is decided under the caller's row lock; a submit that will create a job then takes the one
    ``SubmitLock`` row too, so the count of live jobs below ``JOBS_TOTAL`` is never stale.
    """
    request = SubmitRequest(
        content_key(caller.name, targets, callback_url), callback_url, idempotency_key, _reuse_within(targets)
    )
    with transaction.atomic():
        _lock_caller(caller)
        now = timezone.now()
        submitted = _reuse(caller, request, now) or _create(caller, targets, request, now)
    if not submitted.reused:
        metrics.JOBS.labels("created").inc()
        log.info("job %s submitted caller=%s targets=%d", submitted.job.id, caller.name, len(targets))
        retention.sweep_now_and_then(submitted.job.created_at)
    return submitted


def _lock_caller(caller: ApiKey) -> None:
    """Serialise the caller's submits: its twins, keys and live jobs are read under this lock.

    FOR NO KEY UPDATE, not FOR UPDATE: a worker's commit checks a job's foreign key to the caller
    with FOR KEY SHARE, which this lock lets through (docs/workers.md, "Locks between submits and
    workers"). On SQLite the transaction (``IMMEDIATE``, settings) already holds the one write lock.
    """
    ApiKey.objects.select_for_update(no_key=True).filter(pk=caller.pk).values_list("pk").get()


def _lock_total() -> None:
    """Serialise the submits that create jobs, so that two never both take the last place below
    ``JOBS_TOTAL``: a count made under it sees every job committed before it. Always taken after
    the caller's row, so two submits never wait on each other in a cycle."""
    SubmitLock.hold()


def _reuse(caller: ApiKey, request: SubmitRequest, now: datetime) -> Submitted | None:
    """The job this request's idempotency key or its content twin answers, touched; else ``None``.

    A key sent before with another request is refused; a key new to a twin is remembered for it.
    """
    if request.idempotency_key is not None:
        keys = IdempotencyKey.objects.select_related("job")
        keyed = keys.filter(caller=caller, key=request.idempotency_key).first()
        if keyed is not None:
            if keyed.request_sha256 != request.sha256:
                raise _key_reused(request.idempotency_key, keyed.job_id)
            return _touched(keyed.job)
    if not request.reuse_within:  # a target asks max_age 0: no twin is fresh enough
        return None
    twins = BatchJob.objects.filter(caller=caller, content_key=request.content_key)
    twin = (
        twins.filter(status__in=REUSABLE_STATUSES, created_at__gte=now - request.reuse_within)
        .order_by("-created_at")
        .first()
    )
    if twin is None:
        return None
    if request.idempotency_key is not None:
        _remember_key(caller, request, twin, now)
    return _touched(twin)


def _reuse_within(targets: Sequence[Target]) -> timedelta:
    """The TTL, or the smallest ``max_age`` of the targets when that is less: a twin's answers
    are no fresher than the twin, so one made longer ago than the freshness asked is not reused,
    and a target with ``max_age: 0`` makes a request no twin answers. Nor does one that asks
    ``changes``: its change is this reading's, against the caller's last one."""
    if any(t.options.changes for t in targets):
        return timedelta(0)
    ages = [t.options.max_age for t in targets if t.options.max_age is not None]
    return min([_ttl(), *(timedelta(seconds=age) for age in ages)])


def _touched(job: BatchJob) -> Submitted:
    touch(job)
    metrics.JOBS.labels("reused").inc()
    return Submitted(job, reused=True)


def _create(caller: ApiKey, targets: Sequence[Target], request: SubmitRequest, now: datetime) -> Submitted:
    """A new job, once both caps have room.

    Both caps are first read in one count of the live jobs, the caller's and everyone's; a full
    service is refused there, before any insert (without the lock: a refusal never breaks the
    cap). The total's lock is taken last, after the inserts, so that it is held only for the
    count that includes this job and for the commit.
    """
    live = _live_jobs(now).aggregate(callers=Count("pk", filter=Q(caller=caller)), everyone=Count("pk"))
    if live["callers"] >= settings.SIFT_BATCH_JOBS_PER_CALLER:
        raise _caller_busy()
    if live["everyone"] >= settings.SIFT_BATCH_JOBS_TOTAL:
        raise _jobs_busy()
    job = BatchJob.objects.create(
        caller=caller,
        caller_class=caller.caller_class,
        targets_total=len(targets),
        created_at=now,
        last_read_at=now,
        content_key=request.content_key,
        callback_url=request.callback_url,
    )
    BatchTarget.objects.bulk_create(
        [
            BatchTarget(job_id=job.pk, idx=i, url=t.url, options=t.options.to_dict())
            for i, t in enumerate(targets)
        ]
    )
    if request.idempotency_key is not None:
        _remember_key(caller, request, job, now)
    _lock_total()
    if _full(_live_jobs(now), settings.SIFT_BATCH_JOBS_TOTAL + 1):  # this job counted too
        raise _jobs_busy()  # and the inserts are rolled back
    transaction.on_commit(wakeups.wake_on_submit)
    return Submitted(job, reused=False)


def _live_jobs(now: datetime) -> QuerySet[BatchJob]:
    """Live jobs that hold a cap: one past its TTL is as good as swept."""
    return BatchJob.objects.filter(status__in=LIVE_STATUSES, last_read_at__gte=now - _ttl())


def _full(live: QuerySet[BatchJob], cap: int) -> bool:
    """Whether ``live`` holds ``cap`` jobs or more: whether a ``cap``-th one exists (caps are >= 1)."""
    return live[cap - 1 :].exists()


def _remember_key(caller: ApiKey, request: SubmitRequest, job: BatchJob, now: datetime) -> None:
    assert request.idempotency_key is not None
    IdempotencyKey.objects.create(
        caller=caller, key=request.idempotency_key, request_sha256=request.sha256, job=job, created_at=now
    )


def _key_reused(key: str, job_id: str) -> Refused:
    return Refused(
        Refusal.IDEMPOTENCY_KEY_REUSED,
        f"idempotency key {key!r} was sent before with a different request (job {job_id})",
        "Use a new idempotency key for a new request; resend a key only with the same targets "
        "and callback_url, to retry that request.",
    )


def _caller_busy() -> Refused:
    return Refused(
        Refusal.CALLER_BUSY,
        f"you already have {settings.SIFT_BATCH_JOBS_PER_CALLER} live job(s)",
        "Wait for your live job to finish (GET /v1/batch/{id}?wait=30) or cancel it, then submit again.",
        retry_after=RetryAfter.JOBS,
    )


def _jobs_busy() -> Refused:
    return Refused(
        Refusal.JOBS_BUSY,
        "the service is running as many jobs as it may",
        "Submit again after Retry-After seconds.",
        retry_after=RetryAfter.JOBS,
    )


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


def read_job(caller: ApiKey, job_id: str, *, wait: float, content: bool) -> dict[str, Any]:
    """The caller's job with its targets after a bounded wait: what both ``GET /v1/batch/{id}``
    and MCP's ``batch_get`` answer. ``content=False`` leaves each result's content out."""
    return job_with_targets(caller, wait_for_job(caller, job_id, wait=wait), content=content)


def wait_for_job(caller: ApiKey, job_id: str, *, wait: float) -> waits.Waited:
    """The caller's job, touched, once it has finished or a bounded wait has passed."""
    return waits.until_finished(caller, get_job(caller, job_id), seconds=wait)


def job_with_targets(caller: ApiKey, waited: waits.Waited, *, content: bool) -> dict[str, Any]:
    targets = [target_out(t, content=content) for t in waited.job.targets.order_by("idx")]
    return {**job_summary(waited.job, caller), "targets": targets, "wait_cut_short": waited.cut_short}


# A job's results read from the database at once, when its answer or its event stream is written
# in pieces: what one reader holds in memory, whatever the job's size (at least one target).
PIECE_BYTES = 1024 * 1024
PIECE_TARGETS = 64


@dataclass(frozen=True)
class Piece:
    targets: list[BatchTarget]
    # Whether targets were left for the next piece.
    more: bool


def next_piece(job_id: str, *, by: str, after: int) -> Piece:
    """The job's targets with ``by`` (``idx`` or ``seq``) over ``after``, in that order, as many
    as hold ``PIECE_BYTES`` of results between them (at least one); their sizes are read first,
    so that no more than that is ever loaded."""
    rest = BatchTarget.objects.filter(job_id=job_id, **{f"{by}__gt": after}).order_by(by)
    sizes = list(rest.values_list("pk", "n_bytes")[: PIECE_TARGETS + 1])
    chosen: list[int] = []
    held = 0
    for pk, n_bytes in sizes[:PIECE_TARGETS]:
        if chosen and held + n_bytes > PIECE_BYTES:
            break
        chosen.append(pk)
        held += n_bytes
    targets = list(BatchTarget.objects.filter(pk__in=chosen).order_by(by))
    return Piece(targets, more=len(sizes) > len(chosen))


def get_target(caller: ApiKey, job_id: str, idx: int) -> BatchTarget:
    target = get_job(caller, job_id).targets.filter(idx=idx).first()
    if target is None:
        raise Refused(Refusal.NOT_FOUND, f"job {job_id} has no target {idx}", "Targets are numbered from 0.")
    return target


def touch(job: BatchJob, now: datetime | None = None) -> None:
    """Note the read: a job its owner reads stays alive for another TTL."""
    job.last_read_at = now or timezone.now()
    BatchJob.objects.filter(pk=job.pk).update(last_read_at=job.last_read_at)


def list_jobs(caller: ApiKey, *, limit: int, offset: int) -> tuple[list[BatchJob], int]:
    jobs = list(
        BatchJob.objects.filter(caller=caller).order_by("-created_at", "-pk")[offset : offset + limit]
    )
    now = timezone.now()
    BatchJob.objects.filter(pk__in=[j.pk for j in jobs]).update(last_read_at=now)
    for job in jobs:
        job.last_read_at = now
    prefetch_related_objects(jobs, "webhook_deliveries__attempts")  # what job_summary reads
    return jobs, BatchJob.objects.filter(caller=caller).count()


def cancel(job: BatchJob) -> bool:
    """Cancel a live job at once; ``False`` when it had already finished.

    Pending targets stay pending and are never claimed; a target in flight finishes and its
    result is stored without changing ``cancelled``.
    """
    now = timezone.now()
    with transaction.atomic():
        changed = BatchJob.objects.filter(pk=job.pk, status__in=LIVE_STATUSES).update(
            status=JobStatus.CANCELLED, finished_at=now, last_read_at=now
        )
        if changed:
            events.job_finished(job.pk, now)
    job.refresh_from_db()
    if changed:
        metrics.JOBS.labels("cancelled").inc()
        retention.evict_callers_oldest(job.caller_id)
        done = f"{job.targets_done}/{job.targets_total}"
        log.info("job %s cancelled caller_id=%s done=%s", job.id, job.caller_id, done)
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
