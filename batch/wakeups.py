"""Making sure cluster workers are running: the one place that queues drain tasks.

Every caller names why it wakes the workers (``Wake``); how many ``drain_targets`` tasks that
takes is decided here and nowhere else. See docs/workers.md, "Waking and draining".

- ``SUBMIT``: a job was stored; every worker starts at once, unless a drain is already waiting.
- ``PARTNER``: a drain made its first claim; with two workers the other one starts too (the web
  process may run with other settings, or the partner's drain may have ended earlier), unless
  as many drains as workers are queued or running already, this one included.
- ``HAND_OVER``: a drain spent its budget with work left; exactly one successor, whatever waits,
  since the drain's own task is running, not waiting.
- ``PROCESS_START``: a cluster worker process started (a cluster start or a respawn); work left by
  the previous one resumes at once.
- ``SCHEDULE``: the per-minute safety net, for a task lost some other way.

A running drain claims until no work is left, so a waiting drain task makes another one useless.

``WakingBroker`` is django-q2's ORM broker with a pusher that wakes as soon as a task is queued
instead of at its next poll (docs/decisions.md, "The pusher wakes on NOTIFY").
"""

from __future__ import annotations

import enum
import logging
import os
import threading
import time
from typing import Any

import psycopg
from django.conf import settings
from django.db import DatabaseError, connection, connections
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.tasks import async_task

from batch.models import LIVE_STATUSES, BatchTarget, TargetStatus
from batch.statements import db_time, prepared_cursor

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
    if reason is Wake.PARTNER:
        # The asking drain runs, and claims until no work is left: only the second worker is at
        # stake, so a drain that runs but is about to end may count (it hands over if work is left).
        if settings.SIFT_BATCH_WORKERS < 2:
            return 0
        return max(settings.SIFT_BATCH_WORKERS - _live_drains(), 0)
    if reason in (Wake.PROCESS_START, Wake.SCHEDULE) and not has_unfinished_work():
        return 0
    if _drain_waiting():
        return 0
    return int(settings.SIFT_BATCH_WORKERS)


def _drain_waiting() -> bool:
    """Is a task queued and not yet taken by a worker? (A taken one's lock lies in the future.)

    Every stored submit asks this on commit: one plain statement, prepared on PostgreSQL (the
    ORM's query cost a submit 0.4 ms of CPU to build and compile, more than the rest of its wake).
    """
    q = connection.ops.quote_name
    sql = f"SELECT 1 FROM {q(OrmQ._meta.db_table)} WHERE {q('key')} = %s AND {q('lock')} <= %s LIMIT 1"  # noqa: S608 - names come from the model
    with prepared_cursor() as cursor:
        cursor.execute(sql, [str(settings.Q_CLUSTER["name"]), db_time(timezone.now())])
        return cursor.fetchone() is not None


def _live_drains() -> int:
    """Drain tasks queued or running: a taken task's row stays in the queue until it has run.

    Each row is unpacked to see its function; the queue holds only drains and the few scheduled
    tasks (nothing else queues tasks), so that is a handful of rows.
    """
    queued = OrmQ.objects.filter(key=settings.Q_CLUSTER["name"])
    return sum(1 for task in queued if task.func() == DRAIN_TASK)


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


# --- the pusher's wake-up ----------------------------------------------------------------------


class WakingBroker(ORM):
    """The ORM broker, whose pusher waits for a ``NOTIFY`` instead of sleeping between looks.

    django-q2's pusher looks for queued tasks, and sleeps ``poll`` seconds whenever it finds
    none: a submit waited up to that long (half of it on average) before a worker even got its
    drain. On PostgreSQL every ``enqueue`` also notifies the queue's channel (delivered when the
    task's row commits, so the pusher never wakes before it can see it), and the pusher waits
    for that notification on a connection of its own, ``poll`` seconds at most: the poll stays
    the safety net for a lost notification. On SQLite the pusher sleeps as before.
    """

    def enqueue(self, task: str) -> Any:
        task_id = super().enqueue(task)
        database = connections[Conf.ORM]
        if database.vendor == "postgresql":
            with database.cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, '')", [self.channel])
        return task_id

    def dequeue(self) -> list[tuple[Any, Any]] | None:
        """django-q2's ``ORM.dequeue``, waiting on the channel where it would sleep."""
        tasks = self.get_connection().filter(key=self.list_key, lock__lt=timezone.now())[: Conf.BULK]
        if tasks:
            return [
                (task.pk, task.payload)
                for task in tasks
                if self.get_connection().filter(id=task.id, lock=task.lock).update(lock=self.timeout(task))
            ]
        self.listener.wait(Conf.POLL)
        return None

    @property
    def channel(self) -> str:
        return f"sift_queue_{self.list_key}"

    @property
    def listener(self) -> Listener:
        # The pusher is forked from the process that made the broker: a listener is per process.
        listener = getattr(self, "_listener", None)
        if listener is None or listener.pid != os.getpid():
            listener = self._listener = Listener(self.channel)
        return listener


class Listener:
    """A connection that ``LISTEN``s to one channel, made on first use and again after a failure."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.pid = os.getpid()
        self.connection: psycopg.Connection[Any] | None = None

    def wait(self, seconds: float) -> None:
        """Return at the channel's next notification, or after ``seconds`` (at once on connecting)."""
        database = connections[Conf.ORM]
        if database.vendor != "postgresql":
            time.sleep(seconds)
            return
        try:
            if self.connection is None or self.connection.closed:
                # A notification sent before LISTEN is not delivered: the caller looks once more.
                self.connection = self._listen(database)
                return
            for _ in self.connection.notifies(timeout=seconds, stop_after=1):
                pass
        except psycopg.Error:
            log.warning("pusher: listening for queued tasks failed; polling", exc_info=True)
            self.close()
            time.sleep(seconds)

    def _listen(self, database: Any) -> psycopg.Connection[Any]:
        listening: psycopg.Connection[Any] = database.get_new_connection(database.get_connection_params())
        listening.autocommit = True
        listening.execute(f"LISTEN {database.ops.quote_name(self.channel)}")
        return listening

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.connection = None
