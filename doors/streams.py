"""A job's results as they happen: the Server-Sent Events of ``GET /v1/batch/{id}/events`` (docs/api.md).

Each stream is an async generator on the web process's event loop, so a waiting stream holds no
thread. One ``JobWatch`` a process (a loop) looks at every job its streams follow in one query a
round and wakes the streams whose job moved; a woken stream reads its own new targets. Both run
their queries in a few threads of their own, which hand their connection back after each query. The
watch also renews the leases of the process's open streams, which the stream bounds count in the
whole deployment (``doors/stream_bounds.py``), while they make progress: a stream whose client has
taken nothing for ``SIFT_SEND_TIMEOUT`` is closed by the send timeout (``doors.middleware``), and
is no longer renewed meanwhile. A stream reads its targets a piece at a time (``jobs.next_piece``),
so that what it holds stays small whatever the job's size.

A target's event id is its end sequence number (``BatchTarget.seq``), given in the transaction
that stores it: a stream sends targets in that order and remembers the last, so a stream (or a
client resuming with ``Last-Event-ID``) never misses nor repeats one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DatabaseError, connection

from batch import jobs
from batch.models import FINISHED_STATUSES, ApiKey, BatchJob, JobStatus, TargetStatus
from batch.summaries import job_summary, target_out
from doors import stream_bounds

log = logging.getLogger(__name__)

# How often the process's watch looks at the jobs its streams follow: an event is this late at most.
POLL_SECONDS = 0.25
# Database work of the streams, off the event loop (connections handed back after each query).
QUERIES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sift-streams")
# A job swept or evicted under its stream: the last event says so.
EXPIRED = "expired"

T = TypeVar("T")


async def in_query_thread(function: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(QUERIES, _query, function, *args)


def _query(function: Callable[..., T], *args: Any) -> T:
    try:
        return function(*args)
    finally:
        # Back to the pool under ASGI on PostgreSQL, for the requests; closed anywhere else, so
        # that no idle thread here keeps one open (a broken one is made again on the next query).
        connection.close()


# --- one watch a process ---------------------------------------------------------------------


JobState = tuple[str, int] | None  # (status, targets_done), or None once the job is gone


def job_states(job_ids: list[str]) -> dict[str, JobState]:
    rows = BatchJob.objects.filter(pk__in=job_ids).values_list("pk", "status", "targets_done")
    found: dict[str, JobState] = {pk: (status, done) for pk, status, done in rows}
    return {job_id: found.get(job_id) for job_id in job_ids}


@dataclass
class JobWatch:
    """The jobs this process's streams follow, looked at in one query a round while any is
    followed; and the process's open streams, whose leases it renews every third of a lease."""

    followers: dict[str, set[asyncio.Event]] = field(default_factory=dict)
    seen: dict[str, JobState] = field(default_factory=dict)
    # The open streams, each with the time it began waiting for its client to take an event
    # (``None`` while it is not waiting for its client).
    streams: dict[int, float | None] = field(default_factory=dict)
    renewed_at: float | None = None
    task: asyncio.Task[None] | None = None

    def follow(self, job_id: str, stream_id: int | None = None) -> asyncio.Event:
        """An event set each time the job moves; an open stream's row (``stream_id``) is renewed
        until ``unfollow``, while it makes progress."""
        moved = asyncio.Event()
        self.followers.setdefault(job_id, set()).add(moved)
        if stream_id is not None:
            self.streams[stream_id] = None
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run(), name="sift-job-watch")
        return moved

    def sending(self, stream_id: int) -> None:
        """The stream hands an event to its client, and waits until the client has taken it."""
        self.streams[stream_id] = asyncio.get_running_loop().time()

    def sent(self, stream_id: int) -> None:
        self.streams[stream_id] = None

    def making_progress(self, now: float) -> list[int]:
        """The open streams whose client took their last event, or has been taking it for less
        than ``SIFT_SEND_TIMEOUT``: only these are renewed. A stream whose client stopped reading
        is closed by the send timeout (``doors.middleware``); should it not be, its row lapses."""
        stalled_after = now - settings.SIFT_SEND_TIMEOUT
        return [sid for sid, since in self.streams.items() if since is None or since > stalled_after]

    def unfollow(self, job_id: str, moved: asyncio.Event, stream_id: int | None = None) -> None:
        if stream_id is not None:
            self.streams.pop(stream_id, None)
        left = self.followers.get(job_id, set())
        left.discard(moved)
        if not left:
            self.followers.pop(job_id, None)
            self.seen.pop(job_id, None)

    async def _run(self) -> None:
        while self.followers:
            await self._renew_leases()
            try:
                states = await in_query_thread(job_states, list(self.followers))
            except DatabaseError:
                log.warning("event streams: the database did not answer; trying again", exc_info=True)
                states = {}
            for job_id, state in states.items():
                if job_id in self.followers and self.seen.get(job_id, ()) != state:
                    self.seen[job_id] = state
                    for moved in self.followers[job_id]:
                        moved.set()
            await asyncio.sleep(POLL_SECONDS)

    async def _renew_leases(self) -> None:
        now = asyncio.get_running_loop().time()
        due = self.renewed_at is None or now - self.renewed_at >= settings.SIFT_BATCH_STREAM_LEASE / 3
        if not self.streams or not due:
            return
        try:
            await in_query_thread(stream_bounds.renew, self.making_progress(now))
        except DatabaseError:
            log.warning("event streams: their leases could not be renewed; trying again", exc_info=True)
            return
        self.renewed_at = now


_WATCHES: WeakKeyDictionary[asyncio.AbstractEventLoop, JobWatch] = WeakKeyDictionary()


def job_watch() -> JobWatch:
    """This event loop's watch (one a process under uvicorn)."""
    return _WATCHES.setdefault(asyncio.get_running_loop(), JobWatch())


# --- one stream ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """What a stream has not sent yet: targets ended after its last, and the job's last event once
    nothing more can end (``None`` until then)."""

    targets: list[dict[str, Any]]
    final: dict[str, Any] | None
    # Targets ended after these were left for the next reading.
    more: bool = False


def read_since(caller: ApiKey, job_id: str, after: int, content: bool) -> Reading:
    """Targets numbered after ``after``, a piece at a time (``jobs.next_piece``), and the job's
    summary if it has finished for good and nothing is left after this piece.

    The job (and for a cancelled job, whether a target is still in flight) is read before the
    targets: every target that ended before that read is among those read after it.
    """
    job = BatchJob.objects.filter(pk=job_id, caller=caller).first()
    if job is None:
        return Reading([], {"id": job_id, "status": EXPIRED})
    over = job.status in FINISHED_STATUSES and not (
        job.status == JobStatus.CANCELLED and job.targets.filter(status=TargetStatus.RUNNING).exists()
    )
    piece = jobs.next_piece(job_id, by="seq", after=after)
    targets = [target_out(target, content=content) for target in piece.targets]
    return Reading(targets, job_summary(job, caller) if over and not piece.more else None, piece.more)


def sse(event: str, data: dict[str, Any], event_id: int | None = None) -> str:
    head = f"event: {event}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return head + f"data: {json.dumps(data, cls=DjangoJSONEncoder)}\n\n"


def job_stream(
    caller: ApiKey, job_id: str, stream_id: int, *, after: int, content: bool
) -> AsyncIterator[str]:
    """``job_events``, holding its open stream's row (``stream_id``, admitted by the endpoint) until
    the stream ends however it ends, or is dropped unstarted (a client gone before the first byte)."""
    ended: list[Callable[[], Any]] = []
    events = job_events(caller, job_id, stream_id, after=after, content=content, ended=ended)
    ended.append(weakref.finalize(events, close_stream, stream_id))  # runs at most once
    return events


def close_stream(stream_id: int) -> None:
    """Delete an ended stream's row in a query thread, without waiting: this runs in the stream's
    last step or in a finalizer, on any thread. If the row is left (the process is ending, the
    database does not answer), its lease ends it."""
    with contextlib.suppress(RuntimeError):  # the executor is shut down: the process is ending
        QUERIES.submit(_close_stream, stream_id)


def _close_stream(stream_id: int) -> None:
    try:
        _query(stream_bounds.close, stream_id)
    except DatabaseError:
        log.warning("event stream %d: its row was left to its lease", stream_id, exc_info=True)


async def job_events(
    caller: ApiKey,
    job_id: str,
    stream_id: int,
    *,
    after: int,
    content: bool,
    ended: list[Callable[[], Any]],
) -> AsyncIterator[str]:
    """The stream of one job for its caller, from the target after ``after``: ``target`` events in
    the order they ended, then one ``job`` event, and the end; then each of ``ended`` is called."""
    watch = job_watch()
    moved = watch.follow(job_id, stream_id)

    def sending(event: str) -> str:
        watch.sending(stream_id)  # until the stream resumes: its client has taken the event
        return event

    try:
        yield sending(": sift job events\n\n")
        while True:
            watch.sent(stream_id)
            moved.clear()  # before reading: a move during the read wakes the next wait at once
            reading = await in_query_thread(read_since, caller, job_id, after, content)
            for target in reading.targets:
                after = target["seq"]
                yield sending(sse("target", target, after))
                watch.sent(stream_id)
            if reading.final is not None:
                yield sending(sse("job", reading.final))
                return
            if reading.more:
                continue
            try:
                await asyncio.wait_for(moved.wait(), timeout=settings.SIFT_BATCH_STREAM_KEEPALIVE)
            except TimeoutError:
                yield sending(": keep-alive\n\n")
    finally:
        watch.unfollow(job_id, moved, stream_id)
        for end in ended:
            end()
