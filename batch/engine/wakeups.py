"""Waking the cluster's workers: the one place that queues drain tasks.

One rule, ``wake_workers``: while a live job has work, keep ``WORKERS`` drain tasks waiting in
django-q2's queue, unless they wait already. A submit calls it once it commits, a drain that ends
with work left calls it, and so do every cluster worker process as it starts and the per-minute
schedule. A drain claims until no work is left, so a drain that waits makes another one useless,
and one that ends when work just arrived finds its successor already queued. See docs/workers.md.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone
from django_q.models import OrmQ
from django_q.tasks import async_task

from batch.models import LIVE_STATUSES, BatchTarget, Monitor, TargetStatus

log = logging.getLogger(__name__)

DRAIN_TASK = "batch.engine.tasks.drain_targets"
# Drains keep polling while a monitor falls due this soon; the per-minute wake-up, which looks this
# far ahead too, covers the later ones (docs/workers.md, "Monitors").
MONITOR_LOOKAHEAD = timedelta(seconds=90)
# How often a worker process that started while the database was away tries its wake-up again.
START_RETRY_SECONDS = 5.0


def has_unfinished_work() -> bool:
    """Is any target of a live job waiting or running, or a monitor due within ``MONITOR_LOOKAHEAD``?"""
    unfinished = (TargetStatus.PENDING, TargetStatus.RUNNING)
    if BatchTarget.objects.filter(status__in=unfinished, job__status__in=LIVE_STATUSES).exists():
        return True
    return Monitor.objects.filter(due_at__lte=timezone.now() + MONITOR_LOOKAHEAD).exists()


def wake_workers(*, work_known: bool = False) -> int:
    """Queue drains until ``WORKERS`` of them wait to start, if a live job has work: how many were queued.

    ``work_known``: the caller has just stored work (a submit's commit), so there is no need to look.
    """
    if not work_known and not has_unfinished_work():
        return 0
    missing = max(settings.SIFT_BATCH_WORKERS - waiting_drains(), 0)
    for _ in range(missing):
        async_task(DRAIN_TASK, task_name="drain-targets", group="sift-drain")
    if missing:
        log.debug("queued %d drain(s)", missing)
    return missing


def waiting_drains() -> int:
    """Drain tasks queued and not yet taken by a cluster worker (a taken task's lock lies ahead).

    Each row is unpacked to see its function; the queue holds only drains and the few scheduled
    tasks, so that is a handful of rows.
    """
    queued = OrmQ.objects.filter(key=settings.Q_CLUSTER["name"], lock__lte=timezone.now())
    return sum(1 for task in queued if task.func() == DRAIN_TASK)


def wake_on_submit() -> None:
    """``transaction.on_commit`` callback of a submit, which has just stored pending targets."""
    wake_workers(work_known=True)


def wake_on_process_start(sender: Any = None, proc_name: str = "", **kwargs: Any) -> None:
    """``post_spawn`` receiver: resume stranded work from a thread, so that the worker starts at once."""
    threading.Thread(target=_wake_when_database_answers, name="sift-wake", daemon=True).start()


def _wake_when_database_answers() -> None:
    while True:
        try:
            wake_workers()
            return
        except DatabaseError:
            log.warning("wake at process start: database unavailable; trying again", exc_info=True)
            time.sleep(START_RETRY_SECONDS)
        finally:
            connection.close()
