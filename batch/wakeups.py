"""Making sure cluster workers are running: the one place that queues drain tasks.

Every caller names why it wakes the workers (``Wake``); how many ``drain_targets`` tasks that
takes is decided here and nowhere else. See docs/workers.md, "Waking and draining".

- ``SUBMIT``: a job was stored; every worker starts at once, unless a drain is already waiting.
- ``PARTNER``: a drain made its first claim; with two workers the other one starts too (the web
  process may run with other settings, or the partner's drain may have ended earlier).
- ``HAND_OVER``: a drain spent its budget with work left; exactly one successor, whatever waits,
  since the drain's own task is running, not waiting.
- ``PROCESS_START``: a cluster worker process started (a cluster start or a respawn); work left by
  the previous one resumes at once.
- ``SCHEDULE``: the per-minute safety net, for a task lost some other way.

A running drain claims until no work is left, so a waiting drain task makes another one useless.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone
from django_q.models import OrmQ
from django_q.tasks import async_task

from batch.models import LIVE_STATUSES, BatchTarget, TargetStatus

log = logging.getLogger(__name__)

DRAIN_TASK = "batch.tasks.drain_targets"
# How often a worker process that started while the database was away tries its wake-up again.
START_RETRY_SECONDS = 5.0


def has_unfinished_work() -> bool:
    """Is any target of a live job waiting or running?"""
    return BatchTarget.objects.filter(
        status__in=(TargetStatus.PENDING, TargetStatus.RUNNING), job__status__in=LIVE_STATUSES
    ).exists()


class Wake(enum.StrEnum):
    SUBMIT = "submit"
    PARTNER = "partner"
    HAND_OVER = "hand_over"
    PROCESS_START = "process_start"
    SCHEDULE = "schedule"


def ensure_workers(reason: Wake) -> int:
    """Queue the drain tasks ``reason`` calls for; return how many were queued."""
    count = drains_wanted(reason)
    for _ in range(count):
        async_task(DRAIN_TASK, task_name="drain-targets", group="sift-drain")
    if count:
        log.debug("wake (%s): queued %d drain(s)", reason, count)
    return count


def drains_wanted(reason: Wake) -> int:
    """How many drain tasks to queue now, and why not more."""
    if reason is Wake.HAND_OVER:
        return 1 if has_unfinished_work() else 0
    if reason is Wake.PARTNER and settings.SIFT_BATCH_WORKERS < 2:
        return 0
    if reason in (Wake.PROCESS_START, Wake.SCHEDULE) and not has_unfinished_work():
        return 0
    if _drain_waiting():
        return 0
    return int(settings.SIFT_BATCH_WORKERS)


def _drain_waiting() -> bool:
    """Is a task queued and not yet taken by a worker? (A taken one's lock lies in the future.)"""
    return OrmQ.objects.filter(key=settings.Q_CLUSTER["name"], lock__lte=timezone.now()).exists()


def wake_on_submit() -> None:
    """``transaction.on_commit`` callback of a submit."""
    ensure_workers(Wake.SUBMIT)


def wake_on_process_start(sender: Any = None, proc_name: str = "", **kwargs: Any) -> None:
    """``post_spawn`` receiver: resume stranded work from a thread, so the worker starts at once."""
    threading.Thread(target=_wake_when_database_answers, name="sift-wake", daemon=True).start()


def _wake_when_database_answers() -> None:
    while True:
        try:
            ensure_workers(Wake.PROCESS_START)
            return
        except DatabaseError:
            log.warning("wake at process start: database unavailable; trying again", exc_info=True)
            time.sleep(START_RETRY_SECONDS)
        finally:
            connection.close()
