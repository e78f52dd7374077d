"""The life of a batch target: claim, fetch (outside any transaction), store, settle its job.

The per-target work is a ``FetchFunc``: this module knows nothing about HTTP. See docs/workers.md.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import F, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from batch import metrics, retention
from batch.engine import monitor_runs, rounds, storable, wakeups
from batch.engine.monitor_runs import MonitorRun
from batch.engine.reconnect import DATABASE_GONE, database_went_away, wait_for_database
from batch.engine.rounds import WORKER_SLOTS
from batch.engine.seam import Caller, FetchFunc, Result, RetryLater, TargetFailed  # noqa: F401 (Result)
from batch.models import LIVE_STATUSES, BatchJob, BatchTarget, JobStatus, TargetStatus
from batch.webhooks import events
from capacity.pacing import Every
from capacity.slots import ANYONE
from fetch.outcomes import Outcome
from fetch.targets import Target
from sift_site.log_lines import concerning

log = logging.getLogger(__name__)

MAX_LOST_LEASES = 3
ALL_FAILED = "every target failed; each target's error and hint say why"
IDLE_POLL_SECONDS = 0.2
# A lease outlasts a whole fetch: looking for lost ones once a second per process is soon enough.
RECOVERY = Every(timedelta(seconds=1))

INTERNAL_FAILURE = TargetFailed(Outcome.INTERNAL, "internal error", Outcome.INTERNAL.hint)
TOO_BIG = TargetFailed(Outcome.TOO_LONG, "the result exceeds SIFT_BATCH_MAX_BYTES", Outcome.TOO_LONG.hint)
LOST_THRICE = f"the worker fetching this target was lost {MAX_LOST_LEASES} times"
WORKER_LOST = TargetFailed(Outcome.WORKER_LOST, LOST_THRICE, Outcome.WORKER_LOST.hint)


@dataclass(frozen=True)
class Attempt:
    """Which target, and which attempt at it: only the current attempt may store its end. Storing
    it or giving it back frees its slot, unless its drain keeps the slot for its next claim."""

    target_id: int
    job_id: str
    idx: int
    attempt: int
    keep_slot: bool = field(default=False, kw_only=True)


@dataclass(frozen=True)
class Claim(Attempt):
    """A claimed target and the slot it is fetched in."""

    caller: Caller
    target: Target
    slot: int


# The querysets every claim and store starts from; each use adds its own filters to a copy.
WAITING_TARGETS = rounds.WAITING_TARGETS.select_for_update(skip_locked=True, of=("self",)).values(
    "pk", "job_id", "idx", "url", "options", "attempts", "job__caller_class", "job__caller__name"
)
RUNNING_TARGETS = BatchTarget.objects.filter(status=TargetStatus.RUNNING)
LIVE_JOBS = BatchJob.objects.filter(status__in=LIVE_STATUSES)


def claim_next_target(
    now: datetime | None = None, *, after: Claim | None = None, keep_slot: bool = False
) -> Claim | None:
    """Take the next target in round-robin order into a slot, or ``None`` if no slot or no target.

    The slot is a free one, or the one ``after`` (the drain's previous claim, stored since) was
    fetched in, handed on if that claim still holds it: ``None`` if not (its lease ran out, or a
    release freed it). ``keep_slot``: the new claim's store leaves the slot to the next claim.
    """
    now = now or timezone.now()
    if RECOVERY.due(now):
        recover_lost_claims(now)
    with transaction.atomic():
        slot = after.slot if after is not None else WORKER_SLOTS.take_free(settings.SIFT_BATCH_WORKERS, now)
        claim = None if slot is None else _take_fairest_target(slot, now, after, keep_slot)
    if claim is not None:
        log.debug("job %s target %d claimed attempt=%d slot=%d", claim.job_id, claim.idx, claim.attempt, slot)
    return claim


def _take_fairest_target(slot: int, now: datetime, after: Claim | None, keep_slot: bool) -> Claim | None:
    """Take the fairest target into ``slot`` and give its job its turn, if the job is still live.

    Live jobs take turns in submit order, one target a turn; a job's targets go in index order.
    Only the target's row is locked, so two workers can take two targets of one job at once. A
    cancel committed since the target was read makes the job's update match nothing: the claim is
    rolled back. A later cancel waits for this transaction and lets the target in flight finish.
    """
    row = WAITING_TARGETS.exclude(not_before__gt=now).first()  # no retry waiting for a later time
    if row is None:
        return None
    lease_until = now + timedelta(seconds=settings.SIFT_BATCH_CLAIM_LEASE)
    BatchTarget.objects.filter(pk=row["pk"]).update(
        status=TargetStatus.RUNNING, attempts=F("attempts") + 1, lease_until=lease_until, started_at=now
    )
    held = WORKER_SLOTS.hold(slot, row["pk"], lease_until, instead_of=after.target_id if after else ANYONE)
    # The job's row last, so that it is held only until the commit.
    if not held or not LIVE_JOBS.filter(pk=row["job_id"]).update(served_at=now, status=JobStatus.RUNNING):
        transaction.set_rollback(True)
        return None
    caller = Caller(row["job__caller__name"], row["job__caller_class"])
    target = Target.from_stored(row["url"], row["options"])
    attempt = row["attempts"] + 1
    return Claim(row["pk"], row["job_id"], row["idx"], attempt, caller, target, slot, keep_slot=keep_slot)


def run_claim(claim: Claim, fetch: FetchFunc) -> None:
    """Fetch outside any transaction, then store the result, the failure or the retry."""
    started = time.monotonic()
    try:
        result = fetch(claim.caller, claim.target)
    except RetryLater as busy:
        _retry_or_give_up(claim, busy)
    except TargetFailed as failed:
        _store(claim, failure=failed)
    except Exception as error:
        if database_went_away(error):
            raise  # the drain waits for the database
        log.exception("job %s target %d: the fetch function raised", claim.job_id, claim.idx)
        _store(claim, failure=INTERNAL_FAILURE)
    else:
        _store(claim, result=result)
    finally:
        metrics.TARGET_SECONDS.observe(time.monotonic() - started)


def _store(claim: Attempt, *, result: object = None, failure: TargetFailed | None = None) -> None:
    """Store the target's end and free its slot; if that fails (a value refused, a result that is not
    a mapping), end the target ``internal``, or at least free the slot and leave it to the lease."""
    try:
        with transaction.atomic():
            stored = finish_target(claim, result=result, failure=failure)
    except Exception as error:
        if database_went_away(error):
            raise
        log.exception("job %s target %d: storing its end failed", claim.job_id, claim.idx)
        if failure is INTERNAL_FAILURE:
            WORKER_SLOTS.release_held_by(claim.target_id)
        else:
            _store(claim, failure=INTERNAL_FAILURE)
        return
    try:  # the target is stored and its slot free: a failing eviction must not end the drain
        if stored is not None:
            retention.evict_after_store(stored[0], ended_for=stored[1])
    except Exception:
        log.exception("job %s target %d: eviction after the store failed", claim.job_id, claim.idx)


def finish_target(
    claim: Attempt, *, result: object = None, failure: TargetFailed | None = None
) -> tuple[int, int | None] | None:
    """Store a target's end (``failure`` or else ``result``) and count it, in the caller's transaction:
    the bytes stored and, if it settled the job, its caller's id; ``None`` for a late answer, dropped."""
    ending, now = _storable_end(result, failure), timezone.now()
    current = RUNNING_TARGETS.filter(pk=claim.target_id, attempts=claim.attempt)
    if not current.update(finished_at=now, lease_until=None, **ending):
        return None
    if not claim.keep_slot:
        WORKER_SLOTS.release_held_by(claim.target_id)
    status, n_bytes, outcome = ending["status"], ending["n_bytes"], ending["outcome"] or "ok"
    metrics.TARGETS.labels(outcome).inc()
    log.info("job %s target %d %s outcome=%s bytes=%d", claim.job_id, claim.idx, status, outcome, n_bytes)
    settled = _count_and_settle(claim.job_id, int(status == TargetStatus.FAILED), n_bytes, now)
    # Its end's number is the count just made: the job row's lock orders concurrent stores' numbers.
    counted = BatchJob.objects.filter(pk=claim.job_id).values("targets_done")
    BatchTarget.objects.filter(pk=claim.target_id).update(seq=Subquery(counted))
    return n_bytes, settled


def _count_and_settle(job_id: str, failed: int, n_bytes: int, now: datetime) -> int | None:
    """Count a stored target in its job, and settle the job if that was a live job's last: the
    caller's id if it settled. The job's row is touched last in the store, to hold it briefly."""
    counts: dict[str, Any] = {"targets_done": F("targets_done") + 1, "n_bytes": F("n_bytes") + n_bytes}
    if failed:
        counts["targets_failed"] = F("targets_failed") + failed
    # PostgreSQL checks this condition again on the row once it holds its lock: of two stores at
    # once, exactly one finds itself the last, and only that one reads the counters back.
    if BatchJob.objects.filter(pk=job_id, targets_done__lt=F("targets_total") - 1).update(**counts):
        return None
    job = BatchJob.objects.select_for_update().filter(pk=job_id).values(*SETTLE_FIELDS).first()
    if job is None:
        return None  # swept meanwhile, with its targets
    done, failures, total = job["targets_done"] + 1, job["targets_failed"] + failed, job["targets_total"]
    settles = done == total and job["status"] in LIVE_STATUSES
    final = JobStatus.DONE if failures == 0 else JobStatus.FAILED if failures == total else JobStatus.PARTIAL
    if settles:
        counts |= {"status": final, "error": ALL_FAILED if failures == total else "", "finished_at": now}
    BatchJob.objects.filter(pk=job_id).update(**counts)
    if not settles:
        return None
    events.job_finished(job_id, now)
    metrics.JOBS.labels(final).inc()
    metrics.JOB_SECONDS.observe((now - job["created_at"]).total_seconds())
    log.info("job %s %s done=%d failed=%d", job_id, final, done, failures)
    return int(job["caller_id"])


SETTLE_FIELDS = ("status", "targets_done", "targets_total", "targets_failed", "created_at", "caller_id")


def _storable_end(result: object, failure: TargetFailed | None) -> dict[str, Any]:
    """A target's end as columns that both databases take (``batch/engine/storable.py``); a result too big
    fails ``too_long``, an outcome outside the table (a FetchFunc is pluggable) is ``internal``."""
    if failure is None:
        cleaned = storable.storable_result(result)
        n_bytes = storable.json_bytes(cleaned)
        if n_bytes <= settings.SIFT_BATCH_MAX_BYTES:
            return {"status": TargetStatus.DONE, "result": cleaned, "n_bytes": n_bytes, "outcome": None}
        failure = TOO_BIG
    try:
        outcome = Outcome.of(failure.outcome)
    except ValueError:
        outcome = Outcome.INTERNAL
    error = storable.storable_text(str(failure.error), storable.ERROR_MAX_CHARS)
    hint = storable.storable_text(str(failure.hint), storable.HINT_MAX_CHARS)
    ending = {"status": TargetStatus.FAILED, "result": None, "n_bytes": 0, "outcome": outcome}
    return ending | {"error": error, "hint": hint}


def _retry_or_give_up(claim: Claim, busy: RetryLater) -> None:
    """Back to pending after a wait, or fail ``busy`` once ``RETRY_FOR`` has passed since the first busy.
    A host's turn is waited exactly, however far, and never starts the ``RETRY_FOR`` clock."""
    now = timezone.now()
    first = BatchTarget.objects.filter(pk=claim.target_id).values_list("busy_since", flat=True).first()
    if not busy.host_turn and (now - (first or now)).total_seconds() >= settings.SIFT_BATCH_RETRY_FOR:
        error = f"still busy after {settings.SIFT_BATCH_RETRY_FOR:.0f}s of retrying: {busy}"
        _store(claim, failure=TargetFailed(Outcome.BUSY, error, Outcome.BUSY.hint))
        return
    asked = busy.wait if isinstance(busy.wait, int | float) else 0.0
    # max() keeps RETRY_WAIT against a NaN; min() caps an infinite or huge wait at RETRY_FOR.
    wait = float(min(max(settings.SIFT_BATCH_RETRY_WAIT, asked), settings.SIFT_BATCH_RETRY_FOR))
    wait = max(asked, 0.0) if busy.host_turn else wait
    busy_since = F("busy_since") if busy.host_turn else Coalesce(F("busy_since"), Value(now))
    _give_back(claim, not_before=now + timedelta(seconds=wait), busy_since=busy_since)
    log.debug("job %s target %d busy, retry in %.1fs", claim.job_id, claim.idx, wait)


def _give_back(claim: Attempt, **changes: Any) -> int:
    """Put the target back to pending if the claim is still current, and free its slot unless kept."""
    current = RUNNING_TARGETS.filter(pk=claim.target_id, attempts=claim.attempt)
    changes.update(status=TargetStatus.PENDING, lease_until=None)
    with transaction.atomic():
        changed = current.update(**changes)
        if changed and not claim.keep_slot:
            WORKER_SLOTS.release_held_by(claim.target_id)
    return changed


def recover_lost_claims(now: datetime | None = None) -> int:
    """Targets whose lease ran out go back to pending, or fail ``worker_lost`` the third time; their
    slots need no release (a slot's lease is its target's)."""
    lost = BatchTarget.objects.filter(status=TargetStatus.RUNNING, lease_until__lt=now or timezone.now())
    again = lost.filter(lost_leases__lt=MAX_LOST_LEASES - 1).update(
        status=TargetStatus.PENDING, lease_until=None, lost_leases=F("lost_leases") + 1
    )
    for row in lost.values_list("pk", "job_id", "idx", "attempts"):
        _store(Attempt(*row), failure=WORKER_LOST)
        again += 1
    if again:
        log.warning("%d claim lease(s) expired: their targets are pending again or failed worker_lost", again)
    return again


@dataclass
class InFlight:
    """The claim this process is working on, and whether it may take another: the drain records
    each claim under ``lock``, and a stop (``batch/engine/stopping.py``) sets ``stopping`` under it.
    ``kept`` is the drain's last claim, whose slot the drain keeps until it stops claiming."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: bool = False
    claim: Claim | MonitorRun | None = None
    kept: Claim | MonitorRun | None = None


IN_FLIGHT = InFlight()


def drain(fetch: FetchFunc, *, budget: float) -> int:
    """Claim and run targets until none are left, ``budget`` seconds have passed (before django-q2's
    timeout) or a stop; poll while targets wait. When the database goes away, wait for it and give
    back this turn's claim, to be claimed again. Returns how many ran.

    The drain keeps its slot from one target to the next and frees it when it finds no target,
    ends or stops; a stop between two targets frees it at once (``stop_claiming``)."""
    deadline, ran = time.monotonic() + budget, 0
    try:
        while time.monotonic() < deadline:
            claimed_at = timezone.now()
            try:
                with IN_FLIGHT.lock:  # a claim is recorded before a stop looks, or never taken
                    claim = IN_FLIGHT.claim = None if IN_FLIGHT.stopping else _claim_keeping_slot(claimed_at)
                if claim is None:
                    if IN_FLIGHT.stopping or not wakeups.has_unfinished_work():
                        break
                    time.sleep(IDLE_POLL_SECONDS)
                    continue
                if isinstance(claim, MonitorRun):
                    monitor_runs.run_monitor(claim, fetch)
                else:
                    with concerning(job=str(claim.job_id), target=claim.idx):
                        run_claim(claim, fetch)
                ran += 1
            except DATABASE_GONE as error:
                if not database_went_away(error):
                    raise
                log.warning("drain: the database is unavailable; waiting for it", exc_info=True)
                if wait_for_database(deadline):
                    release_interrupted_claim(claimed_at)
            finally:
                with IN_FLIGHT.lock:
                    IN_FLIGHT.claim = None
                    if IN_FLIGHT.stopping:
                        _free_kept_slot()
    finally:
        with IN_FLIGHT.lock:
            _free_kept_slot()
    return ran


def _claim_keeping_slot(now: datetime) -> Claim | MonitorRun | None:
    """The drain's next claim, in the slot of its last one; with no target, the slot is freed. A
    due monitor whose caller's turn comes first is run instead, in the same slot."""
    run = monitor_runs.claim_if_its_turn(now, kept=IN_FLIGHT.kept)
    if run is not None:
        IN_FLIGHT.kept = run
        return run
    kept = IN_FLIGHT.kept
    if isinstance(kept, MonitorRun):  # a target takes a free slot, not a monitor's
        _free_kept_slot()
        kept = None
    claim = claim_next_target(now, after=kept, keep_slot=True)
    if claim is None:
        _free_kept_slot()
    IN_FLIGHT.kept = claim
    return claim


def _free_kept_slot() -> None:
    """Free the slot the drain kept, if it still holds it; under ``IN_FLIGHT.lock``. If the database
    refuses, the slot's lease frees it."""
    kept, IN_FLIGHT.kept = IN_FLIGHT.kept, None
    try:
        if isinstance(kept, MonitorRun):
            monitor_runs.free_slot(kept)
        elif kept is not None:
            WORKER_SLOTS.release(kept.slot, kept.target_id)
    except DatabaseError:
        log.warning("freeing the drain's slot failed; its lease will free it", exc_info=True)


def release_interrupted_claim(claimed_at: datetime) -> int:
    """Give back what this drain claimed at ``claimed_at`` if it is still ``running``: the database
    went away during its claim, fetch or store. ``started_at`` is the claim's own timestamp, to the
    microsecond: it names this drain's claim and no other, even one whose commit went unanswered."""
    running = BatchTarget.objects.filter(status=TargetStatus.RUNNING, started_at=claimed_at)
    row = running.values_list("pk", "job_id", "idx", "attempts").first()
    released = 0 if row is None else _give_back(Attempt(*row), not_before=None)
    if released:
        log.warning("drain: gave back a claim interrupted by the database going away")
    return released


def stop_claiming(wait: float) -> None:
    """No new claim in this process from now on (the claim in flight, if any, goes on). Between
    two targets, free the slot the drain kept: the process may end before the drain looks again."""
    acquired = IN_FLIGHT.lock.acquire(timeout=wait)
    IN_FLIGHT.stopping = True
    if acquired:
        if IN_FLIGHT.claim is None:
            _free_kept_slot()
        IN_FLIGHT.lock.release()


def release_claim(claim: Claim) -> bool:
    """Give a claim back for an immediate retry, and free its slot: its worker is stopping, not lost
    (``lost_leases`` unchanged). Conditional like every store: a result that committed first wins."""
    released = _give_back(claim, not_before=None)
    WORKER_SLOTS.release(claim.slot, claim.target_id)
    if released:
        log.info("job %s target %d released for a retry: the worker is stopping", claim.job_id, claim.idx)
    return bool(released)
