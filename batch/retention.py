"""How long finished work stays: the sweep of jobs nobody read for the TTL, and eviction by bytes
(callers over their fair share first) and by each caller's count of finished jobs. The cluster
runs both on a schedule, a submit sweeps now and then, a store evicts when its job ends or the
byte budget is due (docs/api.md)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, Count, F, QuerySet, Sum, Value, When
from django.utils import timezone

from batch import metrics
from batch.models import FINISHED_STATUSES, BatchJob, BatchTarget
from capacity.eviction import UncheckedBytes, excess_over, first_to_cover
from capacity.pacing import Every

log = logging.getLogger(__name__)

# How often a submit sweeps expired jobs at most, per process; the cluster sweeps on a schedule too.
SWEEP_EVERY = timedelta(seconds=1)

# Finished jobs one count eviction deletes at most; a finish adds one, so one round keeps up.
EVICT_CHUNK = 500

# The byte budget's turns (eviction_order): over their caller's fair share, read, unread.
OVER_SHARE, READ, UNREAD = 0, 1, 2


@dataclass(frozen=True)
class Removed:
    jobs: int = 0
    targets: int = 0
    bytes: int = 0

    def __str__(self) -> str:
        return f"removed {self.jobs} jobs, {self.targets} targets, {self.bytes} bytes"

    def __add__(self, other: Removed) -> Removed:
        return Removed(self.jobs + other.jobs, self.targets + other.targets, self.bytes + other.bytes)


# A submit sweeps at most once per SWEEP_EVERY in this process (docs/decisions.md).
SWEEPS = Every(SWEEP_EVERY)


def sweep_now_and_then(now: datetime) -> None:
    if SWEEPS.due(now):
        sweep_expired_jobs(now)


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
    """Delete every job not read for longer than the TTL, with its targets."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.SIFT_BATCH_TTL)
    removed = _delete_jobs(
        list(BatchJob.objects.filter(last_read_at__lt=cutoff).values_list("pk", flat=True))
    )
    if removed.jobs:
        metrics.SWEPT.inc(removed.jobs)
        log.info("sweep %s", removed)
    return removed


def evict_oldest(max_bytes: int | None = None) -> Removed:
    """Delete finished jobs until stored result bytes fit ``max_bytes``, in ``eviction_order``.

    Live jobs are never evicted, even when they alone are over the budget.
    """
    budget = settings.SIFT_BATCH_MAX_BYTES if max_bytes is None else max_bytes
    excess = excess_over(BatchJob.objects.all(), budget)
    if excess <= 0:
        return Removed()
    removed = _delete_jobs(first_to_cover(eviction_order(budget), excess))
    if removed.jobs:
        metrics.EVICTED.inc(removed.jobs)
        log.info("evict %s", removed)
    return removed


def eviction_order(budget: int) -> QuerySet[BatchJob]:
    """Finished jobs in the order the byte budget evicts them: one caller's bytes must not evict
    another caller's results.

    A caller's fair share is the budget divided by the callers holding finished jobs. First go the
    jobs of callers whose stored bytes (live jobs' too) are over their share, oldest first among
    theirs; then the jobs of the callers within their share that their owner has read since they
    finished, oldest first; last the ones not read since they finished, oldest first.
    """
    finished = BatchJob.objects.filter(status__in=FINISHED_STATUSES)
    holders = finished.values("caller_id").distinct().count()
    share = budget // max(holders, 1)
    over_share = (
        BatchJob.objects.values("caller_id")
        .annotate(held=Sum("n_bytes"))
        .filter(held__gt=share)
        .values("caller_id")
    )
    turn = Case(
        When(caller_id__in=over_share, then=Value(OVER_SHARE)),
        When(last_read_at__lt=F("finished_at"), then=Value(UNREAD)),
        default=Value(READ),
    )
    return finished.annotate(turn=turn).order_by("turn", "finished_at", "created_at", "pk")


def evict_callers_oldest(caller_id: int, keep: int | None = None) -> Removed:
    """Delete the caller's finished jobs beyond its newest ``keep`` (``SIFT_BATCH_FINISHED_PER_CALLER``).

    Bounds the tables per caller as ``MAX_BYTES`` bounds them in all: failed jobs store no
    bytes, and listing them counts as reading them, so neither the sweep nor the byte budget
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
