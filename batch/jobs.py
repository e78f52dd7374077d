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
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Model, Sum
from django.db.models.fields import AutoFieldMixin
from django.utils import timezone

from batch import metrics, wakeups, webhooks
from batch.errors import Refusal, Refused
from batch.models import (
    FINISHED_STATUSES,
    LIVE_STATUSES,
    REUSABLE_STATUSES,
    SUBMIT_TOKENS,
    ApiKey,
    BatchJob,
    BatchTarget,
    IdempotencyKey,
    JobStatus,
    SubmitLock,
)
from batch.statements import db_time, prepared_cursor
from capacity.eviction import UncheckedBytes, oldest_over_budget
from capacity.pacing import Every
from fetch.outcomes import RetryAfter
from fetch.targets import Target

log = logging.getLogger(__name__)

# How often a submit sweeps expired jobs at most, per process; the cluster sweeps on a schedule too.
SWEEP_EVERY = timedelta(seconds=1)

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

    @property
    def sha256(self) -> str:
        # The targets (through the content key, which names the caller too) and the callback URL.
        return hashlib.sha256(f"{self.content_key}\x00{self.callback_url}".encode()).hexdigest()


@dataclass(frozen=True)
class Seen:
    """What one statement found for a submit: its twins, and the live jobs below each cap."""

    twin_id: str | None
    keyed_job_id: str | None
    keyed_sha256: str | None
    callers_live: int
    live: int


class _NeedEveryToken(Exception):
    """A submit holding one submit token is near ``JOBS_TOTAL``, or found no free token."""


def submit(
    caller: ApiKey,
    targets: Sequence[Target],
    *,
    callback_url: str = "",
    idempotency_key: str | None = None,
) -> Submitted:
    """Store a job of validated ``targets`` for ``caller``, or answer the twin it already has.

    ``callback_url`` has passed the fetch guard already (``batch/api/callbacks.py``).

    A first look without locks answers reuses and refusals when the caps are plainly full; only
    a submit that may create a job takes locks, and near ``JOBS_TOTAL`` it waits for every
    other such submit (docs/decisions.md, "Submit tokens").
    """
    request = SubmitRequest(content_key(caller.name, targets, callback_url), callback_url, idempotency_key)
    seen = _look(caller, request, timezone.now())
    if idempotency_key is not None and seen.keyed_job_id is None and seen.twin_id is not None:
        # The twin will answer a new key, which is remembered under the caller's lock.
        answered: Submitted | int = seen.live
    else:
        answered = _answer(caller, request, seen)
    if isinstance(answered, Submitted):
        return answered
    far_from_cap = answered + SUBMIT_TOKENS <= settings.SIFT_BATCH_JOBS_TOTAL
    try:
        submitted = _store(caller, targets, request, one_token=far_from_cap)
    except _NeedEveryToken:
        submitted = _store(caller, targets, request, one_token=False)
    if not submitted.reused:
        metrics.JOBS.labels("created").inc()
        log.info("job %s submitted caller=%s targets=%d", submitted.job.id, caller.name, len(targets))
        _sweep_now_and_then(submitted.job.created_at)
    return submitted


# A submit sweeps at most once per SWEEP_EVERY in this process (docs/decisions.md).
SWEEPS = Every(SWEEP_EVERY)


def _sweep_now_and_then(now: datetime) -> None:
    if SWEEPS.due(now):
        sweep_expired_jobs(now)


def _store(
    caller: ApiKey, targets: Sequence[Target], request: SubmitRequest, *, one_token: bool
) -> Submitted:
    with transaction.atomic():
        _lock_caller_and_take_tokens(caller, one_token)
        now = timezone.now()
        seen = _look(caller, request, now)
        answered = _answer(caller, request, seen)
        if isinstance(answered, Submitted):
            if request.idempotency_key is not None and seen.keyed_job_id is None:
                _remember_key(caller, request, answered.job, now)
            return answered
        if one_token and answered + SUBMIT_TOKENS > settings.SIFT_BATCH_JOBS_TOTAL:
            raise _NeedEveryToken
        job = BatchJob(
            caller=caller,
            caller_class=caller.caller_class,
            targets_total=len(targets),
            created_at=now,
            lease=now,
            idem_key=request.content_key,
            callback_url=request.callback_url,
        )
        _insert(
            job,
            [
                BatchTarget(job=job, idx=i, url=t.url, options=t.options.to_dict())
                for i, t in enumerate(targets)
            ],
        )
        job._state.adding = False
        if request.idempotency_key is not None:
            _remember_key(caller, request, job, now)
        transaction.on_commit(wakeups.wake_on_submit)
    return Submitted(job, reused=False)


def _insert(job: BatchJob, targets: Sequence[BatchTarget]) -> None:
    """Insert the job and its targets: one statement on PostgreSQL, two on SQLite.

    PostgreSQL runs the job's ``INSERT`` as a data-modifying ``WITH`` of the targets' one (their
    foreign key to the job is checked at commit); SQLite has no such ``WITH``.
    """
    statements = [_insert_statement([job]), _insert_statement(targets)]
    if connection.vendor == "postgresql":
        (job_sql, job_values), (targets_sql, target_values) = statements
        statements = [(f"WITH job AS ({job_sql}) {targets_sql}", [*job_values, *target_values])]
    with prepared_cursor() as cursor:
        for sql, values in statements:
            cursor.execute(sql, values)


def _insert_statement(objs: Sequence[Model]) -> tuple[str, list[Any]]:
    """The ``INSERT`` of ``objs`` (rows of one model, their primary keys set or automatic) and its values.

    ``bulk_create`` and ``create`` less their per-value machinery, which made about a quarter of
    a submit's Python work; each value is still adapted by its own field, defaults included.
    """
    meta = objs[0]._meta
    # An automatic key is the database's to choose, and a column NULL in every row is NULL
    # without being sent.
    fields = [
        f
        for f in meta.concrete_fields
        if not (f.primary_key and isinstance(f, AutoFieldMixin))
        and any(getattr(obj, f.attname) is not None for obj in objs)
    ]
    values = [f.get_db_prep_save(getattr(obj, f.attname), connection) for obj in objs for f in fields]
    q = connection.ops.quote_name
    # Names come from the model, values are parameters.
    table, columns = q(meta.db_table), ", ".join(q(str(f.column)) for f in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    return f"INSERT INTO {table} ({columns}) VALUES {', '.join([row] * len(objs))}", values  # noqa: S608


def _remember_key(caller: ApiKey, request: SubmitRequest, job: BatchJob, now: datetime) -> None:
    assert request.idempotency_key is not None
    IdempotencyKey.objects.create(
        caller=caller, key=request.idempotency_key, request_sha256=request.sha256, job=job, created_at=now
    )


def _lock_caller_and_take_tokens(caller: ApiKey, one_token: bool) -> None:
    """Lock the caller's row, then take one free submit token or every token, in one statement.

    A submit holding one token checked, after taking it, that the live jobs plus every token
    stay within ``JOBS_TOTAL``; so however many such submits commit, the cap holds. Near the cap a
    submit holds every token (waiting for the submits holding them), and is the only one that
    may create a job.

    Locks are always taken in the same order, caller row then tokens, so two submits can never
    wait on each other in a cycle: the caller's lock is an uncorrelated ``EXISTS``, which
    PostgreSQL runs once, as the filter that gates the scan of the tokens, before it locks any
    of them (``tests/test_submit_locks.py`` holds it to that). The caller row is locked FOR NO KEY
    UPDATE: it still serialises the caller's submits, but not the FOR KEY SHARE with which a
    worker's commit checks a job's foreign key to it, while this submit waits to touch that job.

    On SQLite the transaction (``IMMEDIATE``, settings) already holds the one write lock.
    """
    if connection.vendor != "postgresql":
        return
    q = connection.ops.quote_name
    token, caller_table = q(SubmitLock._meta.db_table), q(ApiKey._meta.db_table)
    lock = "LIMIT 1 FOR UPDATE SKIP LOCKED" if one_token else "FOR UPDATE"
    # Names come from the models, the caller's id is a parameter.
    sql = (
        f"SELECT {q('id')} FROM {token} WHERE EXISTS ("  # noqa: S608
        f"SELECT 1 FROM {caller_table} WHERE {q('id')} = %s FOR NO KEY UPDATE) ORDER BY {q('id')} {lock}"
    )
    with prepared_cursor() as cursor:
        cursor.execute(sql, [caller.pk])
        taken = cursor.fetchall()
    if one_token and not taken:
        raise _NeedEveryToken


def _answer(caller: ApiKey, request: SubmitRequest, seen: Seen) -> Submitted | int:
    """The job a twin answers, or a refusal when a cap is full; else the live jobs counted."""
    if seen.keyed_job_id is not None:
        if seen.keyed_sha256 != request.sha256:
            raise Refused(
                Refusal.IDEMPOTENCY_KEY_REUSED,
                f"idempotency key {request.idempotency_key!r} was sent before with a different request "
                f"(job {seen.keyed_job_id})",
                "Use a new idempotency key for a new request; resend a key only with the same targets "
                "and callback_url, to retry that request.",
            )
        if (reused := _reuse(seen.keyed_job_id)) is not None:
            return reused
    if seen.twin_id is not None and (reused := _reuse(seen.twin_id)) is not None:
        return reused
    if seen.callers_live >= settings.SIFT_BATCH_JOBS_PER_CALLER:
        raise Refused(
            Refusal.CALLER_BUSY,
            f"you already have {settings.SIFT_BATCH_JOBS_PER_CALLER} live job(s)",
            "Wait for your live job to finish (GET /v1/batch/{id}?wait=30) or cancel it, then submit again.",
            retry_after=RetryAfter.JOBS,
        )
    if seen.live >= settings.SIFT_BATCH_JOBS_TOTAL:
        raise Refused(
            Refusal.JOBS_BUSY,
            "the service is running as many jobs as it may",
            "Submit again after Retry-After seconds.",
            retry_after=RetryAfter.JOBS,
        )
    return seen.live


def _reuse(job_id: str) -> Submitted | None:
    """The twin, touched; ``None`` when it was deleted since it was seen."""
    twin = BatchJob.objects.filter(pk=job_id).first()
    if twin is None:
        return None
    touch(twin)
    metrics.JOBS.labels("reused").inc()
    return Submitted(twin, reused=True)


def _look(caller: ApiKey, request: SubmitRequest, now: datetime) -> Seen:
    """The reusable twin, the job of the idempotency key, and live jobs counted up to each cap.

    One statement, so that the twins and the counts come from one snapshot: a twin committed
    between two queries would otherwise be counted as a live job but not seen as a twin. Live jobs
    past their lease are as good as swept: they hold no cap.
    """
    job, key = BatchJob._meta.db_table, IdempotencyKey._meta.db_table
    q = connection.ops.quote_name
    live = [str(s) for s in LIVE_STATUSES]
    reusable = [str(s) for s in REUSABLE_STATUSES]
    in_ = ", ".join(["%s"] * len(live))
    in_reusable = ", ".join(["%s"] * len(reusable))
    fresh = db_time(now - _ttl())
    sql = f"""
        SELECT
            (SELECT {q("id")} FROM {q(job)}
                WHERE {q("caller_id")} = %s AND {q("idem_key")} = %s AND {q("status")} IN ({in_reusable})
                AND {q("created_at")} >= %s ORDER BY {q("created_at")} DESC LIMIT 1),
            (SELECT {q("job_id")} FROM {q(key)} WHERE {q("caller_id")} = %s AND {q("key")} = %s),
            (SELECT {q("request_sha256")} FROM {q(key)} WHERE {q("caller_id")} = %s AND {q("key")} = %s),
            (SELECT COUNT(*) FROM (SELECT 1 FROM {q(job)} WHERE {q("caller_id")} = %s
                AND {q("status")} IN ({in_}) AND {q("lease")} >= %s LIMIT %s) mine),
            (SELECT COUNT(*) FROM (SELECT 1 FROM {q(job)}
                WHERE {q("status")} IN ({in_}) AND {q("lease")} >= %s LIMIT %s) every_caller)
    """  # noqa: S608 - names come from the models, values are parameters
    params = [
        caller.pk, request.content_key, *reusable, fresh,
        caller.pk, request.idempotency_key,
        caller.pk, request.idempotency_key,
        caller.pk, *live, fresh, settings.SIFT_BATCH_JOBS_PER_CALLER,
        *live, fresh, settings.SIFT_BATCH_JOBS_TOTAL,
    ]  # fmt: skip
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        twin_id, keyed_job_id, keyed_sha256, callers_live, every_live = cursor.fetchone()
    return Seen(twin_id, keyed_job_id, keyed_sha256, callers_live, every_live)


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


# What this process stored since it last checked the byte budget (capacity.eviction).
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
    if UNCHECKED_BYTES.check_due(n_bytes, settings.SIFT_BATCH_MAX_BYTES, anyway=ended_for is not None):
        removed += evict_oldest()
    return removed
