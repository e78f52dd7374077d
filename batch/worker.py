"""The worker side of the job lifecycle: claim a target, fetch it, store what came back.

See docs/workers.md.

A claim takes one of the ``WORKERS`` slot rows and the fairest pending target in one short
transaction; the fetch runs outside any transaction; the result, the job's counters and, for
the last target, the job's final status are written in another short transaction. In a drain,
that transaction also hands the slot over to the next fairest target (``Successor``), so a
worker goes from one target to the next in one commit. Every write is conditional on the claim
still being ours, so a worker that lost its lease (it was presumed dead) can never store a
second result.

The per-target work is a ``FetchFunc`` (``fetch_func``): this module knows nothing about HTTP
or the fetch pipeline. See docs/workers.md.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.module_loading import import_string

from batch import jobs, metrics, storable, wakeups, webhooks
from batch.models import (
    LIVE_STATUSES,
    ApiKey,
    BatchJob,
    BatchTarget,
    JobStatus,
    TargetStatus,
    WorkerSlot,
)
from batch.statements import as_read_by_the_orm, db_time, prepared_cursor
from capacity.pacing import Every
from capacity.slots import SlotTable
from fetch.outcomes import Outcome
from fetch.targets import Target

log = logging.getLogger(__name__)

# The per-target work in production: imported by name, so that this module never imports the pipeline.
PIPELINE_FETCH = "batch.adapter.fetch_target"
# Where SIFT_TEST_FETCH_FUNC may point: an environment variable must not make a worker import any module.
TEST_FETCH_MODULES = ("tests.", "bench.")
TEST_FETCH_FUNC_RULE = "only a function of a module under tests/ or bench/ may replace the fetch"

# Two rows (made by a migration, or on demand); at most WORKERS of them are used.
WORKER_SLOTS = SlotTable(WorkerSlot, holder="target_id", empty=None)

MAX_LOST_LEASES = 3
RECOVER_EVERY = timedelta(seconds=1)
ALL_FAILED = "every target failed; each target's error and hint say why"
IDLE_POLL_SECONDS = 0.2
RECONNECT_SECONDS = 0.5
# What a database restart looks like from here: the server went away, or the connection broke.
DATABASE_GONE = (OperationalError, InterfaceError)
LOST_CONNECTION_STATES = ("57P01", "57P02", "57P03")  # admin shutdown, crash shutdown, starting up


@dataclass(frozen=True)
class Failure:
    """Why a target failed, as it is stored: an outcome of the table, an error and a hint."""

    outcome: Outcome
    error: str
    hint: str


INTERNAL_FAILURE = Failure(Outcome.INTERNAL, "internal error", Outcome.INTERNAL.hint)
TOO_BIG_FAILURE = Failure(
    Outcome.TOO_LONG, "the result is larger than the service stores", Outcome.TOO_LONG.hint
)


@dataclass(frozen=True)
class Caller:
    name: str
    caller_class: str


Result = dict[str, Any]
FetchFunc = Callable[[Caller, Target], Result]
# A plain SQL statement and its values.
Statement = tuple[str, list[Any]]


class RetryLater(Exception):
    """The FetchFunc found the upstream or our fetch gate busy; try again after ``wait`` seconds.

    ``host_turn``: the upstream's host was not due yet (docs/politeness.md); the target waits
    exactly ``wait`` for its turn, and such waits never use up ``RETRY_FOR``.
    """

    def __init__(self, message: str = "busy", *, wait: float | None = None, host_turn: bool = False) -> None:
        super().__init__(message)
        self.wait = wait
        self.host_turn = host_turn


class TargetFailed(Exception):
    """The FetchFunc could not produce a result, for the reason ``outcome`` names."""

    def __init__(self, outcome: Outcome, error: str, hint: str) -> None:
        super().__init__(error)
        self.outcome = outcome
        self.error = error
        self.hint = hint

    @property
    def failure(self) -> Failure:
        return Failure(self.outcome, self.error, self.hint)


@dataclass(frozen=True)
class TargetRef:
    """Which target, and which attempt at it: only the current attempt may store its end."""

    target_id: int
    job_id: str
    idx: int
    attempt: int


@dataclass(frozen=True)
class Claim(TargetRef):
    slot: int
    caller: Caller
    target: Target


def fetch_func() -> FetchFunc:
    """The pipeline's adapter, or the tests' and benchmarks' stand-in (``SIFT_TEST_FETCH_FUNC``)."""
    override = settings.SIFT_TEST_FETCH_FUNC
    if override and not allowed_test_fetch(override):
        raise ImproperlyConfigured(f"SIFT_TEST_FETCH_FUNC={override!r}: {TEST_FETCH_FUNC_RULE}")
    func: FetchFunc = import_string(override or PIPELINE_FETCH)
    return func


def allowed_test_fetch(path: str) -> bool:
    return path.startswith(TEST_FETCH_MODULES)


def _lease() -> timedelta:
    return timedelta(seconds=settings.SIFT_BATCH_CLAIM_LEASE)


# --- claiming --------------------------------------------------------------------------------


# A claim looks for expired claim leases at most every RECOVER_EVERY in this process: a lease
# outlasts a whole fetch, so a lost target waits a second longer at most, and a drain does not
# pay a query per target for it.
RECOVERY = Every(RECOVER_EVERY)


def claim_next_target(now: datetime | None = None) -> Claim | None:
    """Take a free slot and the next target in round-robin order, or ``None`` if either is missing."""
    now = now or timezone.now()
    _recover_if_due(now)
    with transaction.atomic():
        slot = WORKER_SLOTS.take_free(settings.SIFT_BATCH_WORKERS, now)
        if slot is None:
            return None
        target = _fairest_pending_target(now)
        claim = None if target is None else _serve_and_take(slot, target, now)
        if claim is None:
            return None
    _log_claim(claim)
    return claim


def _log_claim(claim: Claim) -> None:
    log.info(
        "job %s target %d claimed attempt=%d slot=%d", claim.job_id, claim.idx, claim.attempt, claim.slot
    )


def _recover_if_due(now: datetime) -> None:
    if RECOVERY.due(now):
        recover_lost_claims(now)


@dataclass
class Successor:
    """A drain's ask that each store also claim the next target, into the slot it frees.

    One transaction and one commit instead of a store and then a claim, and no moment where the
    slot is free while its worker has work. The next target is the one ``claim_next_target``
    would take, with one exception that keeps two workers from deadlocking: a target of another
    job than the stored one is taken only if that job's row is not locked by another
    transaction at that moment; if it is, the slot is freed and the drain claims as usual,
    waiting its turn. ``claimed_at`` is the last hand-over's claim time: if its commit was
    never answered, the drain gives that claim back by it (``release_unanswered_claim``).
    """

    deadline: float  # time.monotonic(): no hand-over after it, as no claim
    claimed_at: datetime | None = None

    def pass_slot(self, claim: Claim) -> Claim | None:
        """Inside the store's transaction: the next target into ``claim``'s slot, or the slot freed.

        Called under ``IN_FLIGHT.lock``, so that a stop either sees the next claim or prevents it.
        """
        if not IN_FLIGHT.stopping and time.monotonic() < self.deadline:
            now = self.claimed_at = timezone.now()
            target = _fairest_pending_target(now)
            if target is not None and (target.job_id == claim.job_id or _job_row_free(target.job_id)):
                following = _serve_and_take(claim.slot, target, now)
                if following is not None:
                    return following
        _release_slot(claim)
        return None


def _job_row_free(job_id: str) -> bool:
    """Lock the job's row if no other transaction holds it (the store already holds its own job's)."""
    q = connection.ops.quote_name
    sql = f"SELECT 1 FROM {q(BatchJob._meta.db_table)} WHERE {q('id')} = %s LIMIT 1{_skip_locked()}"  # noqa: S608 - names come from the model
    with prepared_cursor() as cursor:
        cursor.execute(sql, [job_id])
        return cursor.fetchone() is not None


def _skip_locked(of: str = "") -> str:
    """``FOR UPDATE [OF of] SKIP LOCKED`` where the database has it; on SQLite, nothing, as Django does
    (there the transaction holds the database's one write lock from its start)."""
    if not connection.features.has_select_for_update_skip_locked:
        return ""
    return f" FOR UPDATE OF {of} SKIP LOCKED" if of else " FOR UPDATE SKIP LOCKED"


class PendingTarget(NamedTuple):
    """The columns of a pending target, its job and its caller that a claim uses."""

    pk: int
    job_id: str
    idx: int
    url: str
    options: dict[str, Any]
    attempts: int
    caller_class: str
    caller_name: str


def _fairest_pending_target(now: datetime) -> PendingTarget | None:
    """Live jobs take turns in submit order, one target per turn; a job's targets go in index order.

    Only the target row is locked, so two workers can take two targets of one job at once.
    Plain values, not model instances: building those cost more than the query. A plain
    statement, as every statement of a claim and a store: the ORM's building and compiling of
    them cost the worker more CPU than the database spent on them (docs/decisions.md).
    """
    q = connection.ops.quote_name
    target, job, caller = (q(m._meta.db_table) for m in (BatchTarget, BatchJob, ApiKey))
    live = ", ".join(["%s"] * len(LIVE_STATUSES))
    # NULLS FIRST where the database knows it; SQLite without it sorts NULL first all the same.
    nulls_first = " NULLS FIRST" if connection.features.supports_order_by_nulls_modifier else ""
    sql = f"""
        SELECT t.{q("id")}, t.{q("job_id")}, t.{q("idx")}, t.{q("url")}, t.{q("options")},
            t.{q("attempts")}, j.{q("caller_class")}, c.{q("name")}
        FROM {target} t
            JOIN {job} j ON t.{q("job_id")} = j.{q("id")}
            JOIN {caller} c ON j.{q("caller_id")} = c.{q("id")}
        WHERE j.{q("status")} IN ({live}) AND t.{q("status")} = %s
            AND (t.{q("not_before")} IS NULL OR t.{q("not_before")} <= %s)
        ORDER BY j.{q("served_at")} ASC{nulls_first}, j.{q("created_at")} ASC, t.{q("job_id")} ASC,
            t.{q("idx")} ASC
        LIMIT 1{_skip_locked(of="t")}
    """  # noqa: S608 - names come from the models, values are parameters
    params = [*(str(s) for s in LIVE_STATUSES), str(TargetStatus.PENDING), db_time(now)]
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    pk, job_id, idx, url, options, attempts, caller_class, caller_name = row
    options = as_read_by_the_orm(OPTIONS, options)
    return PendingTarget(pk, job_id, idx, url, options, attempts, caller_class, caller_name)


# How the ORM reads and writes these JSON columns (SQLite: text; PostgreSQL: jsonb read as text).
OPTIONS = BatchTarget._meta.get_field("options")
RESULT = BatchTarget._meta.get_field("result")


def _serve_and_take(slot: int, target: PendingTarget, now: datetime) -> Claim | None:
    """Give the target's job its turn, if it is still live, and take the target into ``slot``.

    The job's turn is a conditional UPDATE: a cancel that committed since the target was read
    makes it match nothing, and the target is not taken (it never starts); a cancel after it
    waits for this transaction and finds the target in flight, which is let finish
    (docs/workers.md, "Fairness"). One statement on PostgreSQL (``_chain``).
    """
    lease_until = now + _lease()
    attempt = target.attempts + 1
    served, _, _ = _chain(
        [
            _serve_job(target.job_id, now),
            _take(target.pk, attempt, lease_until, now),
            WORKER_SLOTS.hold_statement(slot, target.pk, lease_until),
        ]
    )
    if not served:
        return None
    return Claim(
        target_id=target.pk,
        job_id=target.job_id,
        idx=target.idx,
        attempt=attempt,
        slot=slot,
        caller=Caller(target.caller_name, target.caller_class),
        target=Target.from_stored(target.url, target.options),
    )


def _serve_job(job_id: str, now: datetime) -> Statement:
    """Every live status being served becomes running (a queued job starts, a running one stays)."""
    q = connection.ops.quote_name
    live = ", ".join(["%s"] * len(LIVE_STATUSES))
    sql = (
        f"UPDATE {q(BatchJob._meta.db_table)} SET {q('served_at')} = %s, {q('status')} = %s "  # noqa: S608 - names come from the model
        f"WHERE {q('id')} = %s AND {q('status')} IN ({live})"
    )
    return sql, [db_time(now), str(JobStatus.RUNNING), job_id, *(str(s) for s in LIVE_STATUSES)]


def _take(target_id: int, attempt: int, lease_until: datetime, now: datetime) -> Statement:
    q = connection.ops.quote_name
    sql = (
        f"UPDATE {q(BatchTarget._meta.db_table)} SET {q('status')} = %s, {q('attempts')} = %s, "  # noqa: S608 - names come from the model
        f"{q('lease_until')} = %s, {q('started_at')} = %s, {q('not_before')} = NULL WHERE {q('id')} = %s"
    )
    return sql, [str(TargetStatus.RUNNING), attempt, db_time(lease_until), db_time(now), target_id]


def _chain(updates: list[Statement]) -> list[bool]:
    """Run ``UPDATE``s in order, each only if the one before changed a row: which of them changed one.

    Each must end with its ``WHERE`` clause. On PostgreSQL the chain is one statement, a
    data-modifying ``WITH``: a round trip and a statement fewer per link. Each link's condition
    on the one before is an uncorrelated ``EXISTS``, which PostgreSQL evaluates once, as a filter
    that gates the link's scan, before it touches or locks a row: the rows are locked in the
    chain's order, as by separate statements, and a link that waits for a row lock checks its
    conditions again on the row as committed, as a statement of its own would. SQLite has no
    ``UPDATE`` in a ``WITH``: one statement each, up to the first that changed nothing.
    """
    with prepared_cursor() as cursor:
        if connection.vendor != "postgresql":
            changed: list[bool] = []
            for sql, values in updates:
                if changed and not changed[-1]:
                    changed.append(False)
                    continue
                cursor.execute(sql, values)
                changed.append(bool(cursor.rowcount))
            return changed
        cursor.execute(*_with_links(updates))
        return [bool(link) for link in cursor.fetchone()]


def _with_links(updates: list[Statement]) -> Statement:
    """The chain as one PostgreSQL statement: link ``n`` runs if link ``n - 1`` returned a row."""
    # Only names made here join the links, whose names come from the models; values are parameters.
    links = []
    for n, (sql, _) in enumerate(updates):
        after = f" AND EXISTS (SELECT 1 FROM link{n - 1})" if n else ""  # noqa: S608
        links.append(f"link{n} AS ({sql}{after} RETURNING 1)")
    found = ", ".join(f"EXISTS (SELECT 1 FROM link{n})" for n in range(len(updates)))  # noqa: S608
    sql = f"WITH {', '.join(links)} SELECT {found}"
    return sql, [value for _, values in updates for value in values]


# --- running and storing ---------------------------------------------------------------------


def run_claim(claim: Claim, fetch: FetchFunc, successor: Successor | None = None) -> Claim | None:
    """Fetch outside any transaction, then store the result, the failure or the retry.

    With a ``successor``, the store also claims the next target: that claim is returned.
    """
    started = time.monotonic()
    try:
        result = fetch(claim.caller, claim.target)
    except RetryLater as busy:
        return _retry_or_give_up(claim, busy, successor)
    except TargetFailed as failed:
        return _finish(claim, TargetStatus.FAILED, failure=failed.failure, successor=successor)
    except Exception as error:
        if connection_lost(error):
            raise  # the drain waits for the database and runs the claim again while it is ours
        log.exception("job %s target %d: the fetch function raised", claim.job_id, claim.idx)
        return _finish(claim, TargetStatus.FAILED, failure=INTERNAL_FAILURE, successor=successor)
    else:
        return _finish(claim, TargetStatus.DONE, result=result, successor=successor)
    finally:
        metrics.TARGET_SECONDS.observe(time.monotonic() - started)


def _finish(
    claim: Claim,
    status: str,
    *,
    result: object = None,
    failure: Failure | None = None,
    successor: Successor | None = None,
) -> Claim | None:
    """Store the target's end and free or hand over the slot; a store that fails ends the target ``internal``.

    Whatever went wrong (a value the database refused, a result that is not a mapping), the
    slot is freed at once: the drain goes on with the next target, never waiting for the lease.
    """
    following = None
    try:
        with _ending(claim, successor) as end:
            stored = finish_target(claim, status, result=result, failure=failure)
            end.pass_slot()
        following = end.following  # only once it committed
    except Exception as error:
        if connection_lost(error):
            raise  # not a value the database refused: the drain waits and stores it again
        log.exception("job %s target %d: storing its end failed", claim.job_id, claim.idx)
        stored = _finish_internal(claim)
    if stored is not None:
        _evict_after(claim, stored)
    return following


@dataclass
class Ending:
    """The slot of a claim whose end is being stored: freed, or handed over by the ``successor``."""

    claim: Claim
    successor: Successor | None
    following: Claim | None = None

    def pass_slot(self) -> Claim | None:
        if self.successor is None:
            _release_slot(self.claim)
        else:
            self.following = self.successor.pass_slot(self.claim)
        return self.following


@contextmanager
def _ending(claim: Claim, successor: Successor | None) -> Iterator[Ending]:
    """The store's transaction; with a ``successor``, under ``IN_FLIGHT.lock``, and the claim it
    hands over recorded in flight as it commits, so that a stop always knows what to give back."""
    end = Ending(claim, successor)
    if successor is None:
        with transaction.atomic():
            yield end
        return
    _recover_if_due(timezone.now())
    with IN_FLIGHT.lock:
        with transaction.atomic():
            yield end
        IN_FLIGHT.claim = end.following
    if end.following is not None:
        _log_claim(end.following)


def _evict_after(ref: TargetRef, stored: Stored) -> None:
    # The target is stored and its slot free; a failing eviction must not end the drain.
    try:
        jobs.evict_after_store(stored.n_bytes, ended_for=stored.ended_for)
    except Exception:
        log.exception("job %s target %d: eviction after the store failed", ref.job_id, ref.idx)


def _finish_internal(claim: Claim) -> Stored | None:
    """End the target ``internal`` in a fresh transaction; free the slot even if that fails too."""
    try:
        with transaction.atomic():
            stored = finish_target(claim, TargetStatus.FAILED, failure=INTERNAL_FAILURE)
            _release_slot(claim)
    except Exception as error:
        if connection_lost(error):
            raise
        log.exception("job %s target %d: storing internal failed as well", claim.job_id, claim.idx)
        stored = None
        try:
            _release_slot(claim)
        except Exception:
            # The database itself is gone; the claim's lease returns the target when it is back.
            log.exception("job %s target %d: releasing the slot failed", claim.job_id, claim.idx)
    return stored


@dataclass(frozen=True)
class Stored:
    """What a store changed, for the eviction after it: the bytes, and whose job it ended, if it did."""

    n_bytes: int
    ended_for: int | None  # the caller's id


def finish_target(
    ref: TargetRef, status: str, *, result: object = None, failure: Failure | None = None
) -> Stored | None:
    """Store a target's end and update its job, inside the caller's transaction; ``None`` if not current.

    Only the claim that is still current (same attempt, still running) may store; the last
    target of a live job also settles the job's status and ``finished_at``. What is stored is
    cleaned here, the one place results and failures are written (``batch/storable.py``).
    """
    status, cleaned, n_bytes, failure = _storable_end(status, result, failure)
    now = timezone.now()
    failed = 1 if status == TargetStatus.FAILED else 0
    # Any target but the job's last is counted with its store, in one chain; the last one (the
    # condition, checked on the job's row as it is once locked, fails only for it) is counted
    # next, and settles the job as well.
    stored, counted = _chain(
        [
            _store_end(ref, status, cleaned=cleaned, n_bytes=n_bytes, failure=failure, now=now),
            _count(ref.job_id, failed, n_bytes, unless_last=True),
        ]
    )
    if not stored:
        return None
    last = not counted
    if last:
        _chain([_count(ref.job_id, failed, n_bytes, unless_last=False)])
    outcome = "ok" if failure is None else failure.outcome.value
    metrics.TARGETS.labels(outcome).inc()
    log.info(
        "job %s target %d %s outcome=%s bytes=%d",
        ref.job_id,
        ref.idx,
        status,
        outcome,
        n_bytes,
    )
    return Stored(n_bytes, _settle_job(ref.job_id, now) if last else None)


def _store_end(
    ref: TargetRef,
    status: str,
    *,
    cleaned: Result | None,
    n_bytes: int,
    failure: Failure | None,
    now: datetime,
) -> Statement:
    """Write the target's end if ``ref`` is still its current claim (same attempt, still running).

    The result goes through the field's own ``get_db_prep_save``: JSON as the ORM stores it on
    either database.
    """
    q = connection.ops.quote_name
    sql = f"""
        UPDATE {q(BatchTarget._meta.db_table)} SET {q("status")} = %s, {q("result")} = %s,
            {q("n_bytes")} = %s, {q("finished_at")} = %s, {q("lease_until")} = NULL, {q("outcome")} = %s,
            {q("error")} = %s, {q("hint")} = %s
        WHERE {q("id")} = %s AND {q("status")} = %s AND {q("attempts")} = %s
    """  # noqa: S608 - names come from the model, values are parameters
    values = [
        str(status),
        RESULT.get_db_prep_save(cleaned, connection),
        n_bytes,
        db_time(now),
        None if failure is None else failure.outcome.value,
        "" if failure is None else failure.error,
        "" if failure is None else failure.hint,
        ref.target_id,
        str(TargetStatus.RUNNING),
        ref.attempt,
    ]
    return sql, values


def _count(job_id: str, failed: int, n_bytes: int, *, unless_last: bool) -> Statement:
    """Count a stored target in its job's counters; ``unless_last``: only if it is not the job's last."""
    q = connection.ops.quote_name
    done, total, n_failed, job_bytes = map(q, ("targets_done", "targets_total", "targets_failed", "n_bytes"))
    condition = f" AND {done} < ({total} - 1)" if unless_last else ""
    sql = (
        f"UPDATE {q(BatchJob._meta.db_table)} SET {done} = {done} + 1, {n_failed} = {n_failed} + %s, "  # noqa: S608 - names come from the model
        f"{job_bytes} = {job_bytes} + %s WHERE {q('id')} = %s{condition}"
    )
    return sql, [failed, n_bytes, job_id]


def _storable_end(
    status: str, result: object, failure: Failure | None
) -> tuple[str, Result | None, int, Failure | None]:
    """Clean a result or a failure so that both databases take it; a result too big fails ``too_long``."""
    if status == TargetStatus.DONE:
        cleaned = storable.storable_result(result)
        n_bytes = storable.json_bytes(cleaned)
        if n_bytes <= settings.SIFT_BATCH_MAX_BYTES:
            return status, cleaned, n_bytes, None
        status, failure = TargetStatus.FAILED, TOO_BIG_FAILURE
    failure = failure or INTERNAL_FAILURE
    return (
        status,
        None,
        0,
        Failure(
            _in_table(failure.outcome),
            storable.storable_text(str(failure.error), storable.ERROR_MAX_CHARS),
            storable.storable_text(str(failure.hint), storable.HINT_MAX_CHARS),
        ),
    )


def _in_table(outcome: object) -> Outcome:
    """A FetchFunc is pluggable: an outcome outside the table is stored as ``internal``."""
    try:
        return Outcome.of(outcome)
    except ValueError:
        return Outcome.INTERNAL


def _settle_job(job_id: str, now: datetime) -> int | None:
    """Settle the job if its last target is in and it is live: its caller's id if it settled.

    The counters are read back after their ``UPDATE`` in the same transaction, which holds the
    job's row until it commits (on SQLite, the whole database): no other store or cancel can
    change them between the read and the settling ``UPDATE``, itself conditional all the same.
    """
    counted = (
        BatchJob.objects.filter(pk=job_id)
        .values_list("status", "targets_done", "targets_total", "targets_failed", "created_at", "caller_id")
        .first()
    )
    if counted is None:
        return None  # swept meanwhile, with its targets
    status, done, total, failed, created_at, caller_id = counted
    if status not in LIVE_STATUSES or done != total:
        return None
    final = JobStatus.DONE if failed == 0 else JobStatus.FAILED if failed == total else JobStatus.PARTIAL
    if not BatchJob.objects.filter(pk=job_id, status__in=LIVE_STATUSES).update(
        status=final, error=ALL_FAILED if final == JobStatus.FAILED else "", finished_at=now
    ):
        return None
    webhooks.job_finished(job_id, now)
    metrics.JOBS.labels(final).inc()
    metrics.JOB_SECONDS.observe((now - created_at).total_seconds())
    log.info("job %s %s done=%d failed=%d", job_id, final, done, failed)
    return caller_id


def _retry_or_give_up(claim: Claim, busy: RetryLater, successor: Successor | None = None) -> Claim | None:
    now = timezone.now()
    if busy.host_turn:
        wait = max(busy.wait or 0.0, 0.0)  # exactly the turn's distance, however far
    else:
        first_busy = (
            BatchTarget.objects.filter(pk=claim.target_id).values_list("busy_since", flat=True).first() or now
        )
        if (now - first_busy).total_seconds() >= settings.SIFT_BATCH_RETRY_FOR:
            error = f"still busy after {settings.SIFT_BATCH_RETRY_FOR:.0f}s of retrying: {busy}"
            busy_failure = Failure(Outcome.BUSY, error, Outcome.BUSY.hint)
            return _finish(claim, TargetStatus.FAILED, failure=busy_failure, successor=successor)
        wait = _retry_wait(busy.wait)
    try:
        following = _store_retry(claim, now, wait, busy=not busy.host_turn, successor=successor)
    except Exception as error:
        if connection_lost(error):
            raise
        log.exception("job %s target %d: storing the retry failed", claim.job_id, claim.idx)
        stored = _finish_internal(claim)
        if stored is not None:
            _evict_after(claim, stored)
        return None
    log.info("job %s target %d busy, retry in %.1fs", claim.job_id, claim.idx, wait)
    return following


def _retry_wait(asked: float | None) -> float:
    """``RETRY_WAIT``, or longer when asked, never past ``RETRY_FOR`` (a NaN asks for nothing)."""
    wait = settings.SIFT_BATCH_RETRY_WAIT
    if not isinstance(asked, int | float):
        return wait
    try:
        seconds = float(asked)
    except OverflowError:
        seconds = math.inf
    return wait if math.isnan(seconds) else max(wait, min(seconds, settings.SIFT_BATCH_RETRY_FOR))


def _store_retry(
    claim: Claim, now: datetime, wait: float, *, busy: bool = True, successor: Successor | None = None
) -> Claim | None:
    """Back to pending until ``now + wait``; ``busy`` starts the ``RETRY_FOR`` clock if not yet started."""
    busy_since = Coalesce(F("busy_since"), Value(now)) if busy else F("busy_since")
    with _ending(claim, successor) as end:
        BatchTarget.objects.filter(
            pk=claim.target_id, status=TargetStatus.RUNNING, attempts=claim.attempt
        ).update(
            status=TargetStatus.PENDING,
            not_before=now + timedelta(seconds=wait),
            busy_since=busy_since,
            lease_until=None,
        )
        return end.pass_slot()


def _release_slot(claim: Claim) -> None:
    WORKER_SLOTS.release(claim.slot, claim.target_id)


# --- crash recovery --------------------------------------------------------------------------


def recover_lost_claims(now: datetime | None = None) -> int:
    """Targets whose claim lease ran out go back to pending, or fail ``worker_lost`` the third time."""
    now = now or timezone.now()
    lost = list(
        BatchTarget.objects.filter(status=TargetStatus.RUNNING, lease_until__lt=now).values_list(
            "pk", "job_id", "idx", "attempts", "lost_leases"
        )
    )
    for target_id, job_id, idx, attempt, lost_leases in lost:
        ref = TargetRef(target_id, job_id, idx, attempt)
        stored = None
        with transaction.atomic():
            if lost_leases + 1 >= MAX_LOST_LEASES:
                stored = finish_target(
                    ref,
                    TargetStatus.FAILED,
                    failure=Failure(
                        Outcome.WORKER_LOST,
                        f"the worker fetching this target was lost {MAX_LOST_LEASES} times",
                        Outcome.WORKER_LOST.hint,
                    ),
                )
            else:
                BatchTarget.objects.filter(
                    pk=target_id, status=TargetStatus.RUNNING, attempts=attempt
                ).update(status=TargetStatus.PENDING, lease_until=None, lost_leases=F("lost_leases") + 1)
            WORKER_SLOTS.release_held_by(target_id)
        log.warning("job %s target %d: claim lease expired (lost %d)", job_id, idx, lost_leases + 1)
        if stored is not None:
            _evict_after(ref, stored)
    return len(lost)


# --- the drain loop --------------------------------------------------------------------------


class InFlight:
    """The claim this process is working on, and whether it may take another.

    The drain records each claim under ``lock``, and a stop (``batch/stopping.py``) sets
    ``stopping`` under the same lock: a claim is either recorded before the stop looks at it or
    never taken, so a stop always knows what to give back.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stopping = False
        self.claim: Claim | None = None


IN_FLIGHT = InFlight()


def drain(fetch: FetchFunc, *, budget: float) -> int:
    """Claim and run targets until none are left or ``budget`` seconds have passed; return how many ran.

    Each store claims the next target in its own transaction (``Successor``); a drain claims
    on its own only to start, and after a store that found nothing to hand over. While targets
    wait (busy retries, or every slot taken), poll; a new claim starts only within the budget,
    so the task ends before django-q2's timeout would kill it. With two workers, the first
    claim makes sure a drain is queued for the other worker process too, whoever queued this
    one. A stop ends the loop before the next claim; the database going away (a restart)
    pauses it until the database answers again.
    """
    successor = Successor(deadline=time.monotonic() + budget)
    ran = 0
    claim: Claim | None = None
    while claim is not None or time.monotonic() < successor.deadline:
        now = timezone.now()
        try:
            if claim is None:
                claim = _claim_unless_stopping(now)
                if claim is None:
                    if IN_FLIGHT.stopping or not wakeups.has_unfinished_work():
                        break
                    time.sleep(IDLE_POLL_SECONDS)
                    continue
                if ran == 0:
                    wakeups.ensure_workers(wakeups.Wake.PARTNER)
            claim = _run_to_its_end(claim, fetch, successor)
            ran += 1
        except DATABASE_GONE as error:
            if not database_went_away(error):
                raise
            log.warning("drain: the database is unavailable; waiting for it", exc_info=True)
            claim = None
            with IN_FLIGHT.lock:
                IN_FLIGHT.claim = None  # if one was taken, it is given back below
            if wait_for_database(successor.deadline):
                release_unanswered_claim(now)
    return ran


def _claim_unless_stopping(now: datetime) -> Claim | None:
    with IN_FLIGHT.lock:
        if IN_FLIGHT.stopping:
            return None
        IN_FLIGHT.claim = claim_next_target(now)
        return IN_FLIGHT.claim


def _run_to_its_end(claim: Claim, fetch: FetchFunc, successor: Successor) -> Claim | None:
    """Run the claim, and return the claim its store handed over; if the database went away
    before its end was stored, run it again.

    Only while the claim is still ours (still ``running`` at our attempt) once the database
    answers again: a store that did commit before the connection broke, or a lease that ran
    out meanwhile, makes it someone else's, and the conditional store drops any late answer.
    A hand-over in a commit that was never answered is given back first.
    """
    lease_end = time.monotonic() + settings.SIFT_BATCH_CLAIM_LEASE
    following = None
    try:
        while True:
            try:
                successor.claimed_at = None  # set again by this run's hand-over, if it tries one
                following = run_claim(claim, fetch, successor)
                return following
            except DATABASE_GONE as error:
                if not database_went_away(error):
                    raise
                log.warning("job %s target %d: the database went away; retrying", claim.job_id, claim.idx)
                if not wait_for_database(lease_end):
                    return None
                if successor.claimed_at is not None:
                    release_unanswered_claim(successor.claimed_at)
                if time.monotonic() > lease_end or not _still_ours(claim):
                    return None
    finally:
        with IN_FLIGHT.lock:
            IN_FLIGHT.claim = following


def _still_ours(claim: TargetRef) -> bool:
    return BatchTarget.objects.filter(
        pk=claim.target_id, status=TargetStatus.RUNNING, attempts=claim.attempt
    ).exists()


def database_went_away(error: Exception) -> bool:
    """Did this error come from a lost connection, rather than one statement refused?

    A statement the server refuses on a healthy connection (a timeout, a row too large, a
    deadlock) would fail again the same way; only a lost connection is worth waiting for.
    PostgreSQL names a lost or refused connection with SQLSTATE class 08 or a shutdown (57P01
    to 57P03); psycopg gives none when the socket itself broke. SQLite never goes away.
    """
    if isinstance(error, InterfaceError):
        return True
    sqlstate = getattr(error.__cause__, "sqlstate", None)
    if sqlstate is not None:
        return bool(sqlstate.startswith("08") or sqlstate in LOST_CONNECTION_STATES)
    return connection.vendor == "postgresql"


def connection_lost(error: Exception) -> bool:
    """Is ``error`` the database going away (worth waiting for), not a statement it refused?"""
    return isinstance(error, DATABASE_GONE) and database_went_away(error)


def wait_for_database(until: float) -> bool:
    """Reconnect every half second until the database answers (``True``) or ``until`` passes."""
    while True:
        connection.close()  # a broken connection is never reused; a new one is made on demand
        try:
            connection.ensure_connection()
            return True
        except DATABASE_GONE:
            if time.monotonic() >= until:
                return False
            time.sleep(RECONNECT_SECONDS)


def release_unanswered_claim(claimed_at: datetime) -> int:
    """Give back a claim this drain took at ``claimed_at`` but never heard of.

    The connection can break after the server committed a claim and before its answer arrived:
    the target is ``running`` and nobody runs it. ``started_at`` is the claim's own timestamp,
    to the microsecond, so it names this drain's claim and no other.
    """
    released = 0
    running = BatchTarget.objects.filter(status=TargetStatus.RUNNING, started_at=claimed_at)
    for target_id in running.values_list("pk", flat=True):
        with transaction.atomic():
            if running.filter(pk=target_id).update(
                status=TargetStatus.PENDING, lease_until=None, not_before=None
            ):
                WORKER_SLOTS.release_held_by(target_id)
                released += 1
    if released:
        log.warning("drain: gave back %d claim(s) whose commit was never answered", released)
    return released


# --- stopping --------------------------------------------------------------------------------


def stop_claiming(wait: float) -> None:
    """No new claim in this process from now on (the claim in flight, if any, goes on)."""
    acquired = IN_FLIGHT.lock.acquire(timeout=wait)
    IN_FLIGHT.stopping = True
    if acquired:
        IN_FLIGHT.lock.release()


def release_claim(claim: Claim) -> bool:
    """Give a claim back for an immediate retry: its worker is stopping, not lost.

    The target goes back to ``pending`` with ``lost_leases`` unchanged, so a stop never counts
    toward ``worker_lost``. Conditional like every store: a result that committed first wins
    and nothing is released.
    """
    with transaction.atomic():
        released = BatchTarget.objects.filter(
            pk=claim.target_id, status=TargetStatus.RUNNING, attempts=claim.attempt
        ).update(status=TargetStatus.PENDING, lease_until=None, not_before=None)
        _release_slot(claim)
    if released:
        log.info("job %s target %d released for a retry: the worker is stopping", claim.job_id, claim.idx)
    return bool(released)
