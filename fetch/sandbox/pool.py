"""Warm, resource-limited child processes for the parsers that read untrusted bytes.

PDF text, jq and HTML extraction run in ``child.py``, started with ``subprocess`` rather
than ``multiprocessing`` (django-q2 workers are daemonic multiprocessing children, which may not
create multiprocessing children of their own) and kept warm between calls. A child inherits
nothing it does not need: an empty environment (no ``SECRET_KEY``, no ``DATABASE_URL``), Python's
isolated mode, ``/`` as its working directory, and no file descriptor but its pipes (so no
database connection). Each child limits itself with ``RLIMIT_AS`` and a per-request
``RLIMIT_CPU``; the parent enforces a wall deadline over the pipes and kills a child that misses
it. Whatever a child does (loops, aborts, segfaults, floods its pipe) the caller gets a
``FetchError`` and the next call a fresh child: ``filter_timeout`` for a child out of time (the
wall deadline, SIGXCPU), ``memory_limit`` for one out of memory (a reported ``MemoryError``, its
memory exit status, or death by any other signal: under ``RLIMIT_AS`` PDFium and jq abort when an
allocation fails, and the kernel's OOM killer sends SIGKILL), ``internal`` for anything else.

One ``Sandbox`` per process, shared by its threads. Its children start on demand, one for each
request that finds none idle, up to ``SANDBOX_CHILDREN``, except the one a web worker starts as
it starts (``sift_site/gunicorn_hooks.py``), so that its first fetch does not wait for a child.
A child idle for ``SIFT_SANDBOX_IDLE`` is stopped, except those started ahead of use (``warm_up``).
A process forked from one that already had children (gunicorn with ``--preload``, django-q2
workers) starts with none of its own. One child and its pipes: ``pipes.py``.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
from typing import Any

from django.conf import settings

from fetch import metrics
from fetch.errors import FetchError
from fetch.outcomes import Outcome, RetryAfter
from fetch.sandbox.finish_line import clamped
from fetch.sandbox.pipes import Child, ChildEnded, ChildMisbehaved, ChildTimedOut, ending, outcome_hint
from sift_site.log_lines import handed_on

logger = logging.getLogger(__name__)

# Children per process, at most: one per core (PDF, jq and HTML are CPU-bound, and more would
# only share the cores), at least two so that a gthread worker stays responsive while one child
# chews a big document. Children start on demand, so a worker serving one target at a time
# starts one.
SANDBOX_CHILDREN = min(8, max(2, len(os.sched_getaffinity(0))))
# Address-space limit of a child: PDFium and jq abort when an allocation fails under it.
SANDBOX_MEMORY_BYTES = 1 << 30
# A child serves this many requests, then is replaced, so leaks in the parsers stay bounded;
# many, because a child's memory stays flat over the benchmark's pages and a new child's imports
# cost CPU (docs/benchmarks.md, "Extraction through the service").
SANDBOX_REQUESTS_PER_CHILD = 1000
# A new child imports PDFium, jq and trafilatura before it serves anything; that wait, up to this
# long, is not charged to the first request's wall budget.
SANDBOX_START_SECONDS = 30.0


class Sandbox:
    """A pool of up to ``children`` warm children, shared by the threads of one process."""

    def __init__(
        self,
        children: int = SANDBOX_CHILDREN,
        memory_bytes: int = SANDBOX_MEMORY_BYTES,
        idle_seconds: float | None = None,
    ) -> None:
        self.size = children
        self.memory_bytes = memory_bytes
        self.idle_seconds = settings.SIFT_SANDBOX_IDLE if idle_seconds is None else idle_seconds
        self.kept_warm = 0  # children never stopped for idleness (``warm_up``)
        self._cond = threading.Condition()
        self._idle: list[Child] = []  # oldest idle first: released ones are appended
        self._children: set[Child] = set()
        self._live = 0
        self._idle_watch: threading.Thread | None = None

    def run(
        self,
        op: str,
        args: dict[str, Any],
        payload: bytes,
        *,
        cpu_seconds: float,
        wall_seconds: float,
        subject: str,
        hint: str,
        max_reply_bytes: int,
        memory_hint: str | None = None,
    ) -> tuple[dict[str, Any], bytes]:
        """Send one request to a child and return its reply header and data.

        Raises ``FetchError``: ``filter_timeout`` when the child runs out of time (with
        ``hint``), ``memory_limit`` when it runs out of memory (with ``memory_hint``, by default
        the outcome's own), ``busy`` when no child frees up within ``wall_seconds``, ``internal``
        when a child cannot be started, breaks the protocol or dies otherwise. ``subject`` ("the
        PDF reader") words those errors for the agent.
        """
        (reply,) = self.run_shared(
            op,
            args,
            payload,
            cpu_seconds=cpu_seconds,
            wall_seconds=wall_seconds,
            subject=subject,
            hint=hint,
            max_reply_bytes=max_reply_bytes,
            max_children=1,
            memory_hint=memory_hint,
        )
        return reply

    def run_shared(
        self,
        op: str,
        args: dict[str, Any],
        payload: bytes,
        *,
        cpu_seconds: float,
        wall_seconds: float,
        subject: str,
        hint: str,
        max_reply_bytes: int,
        max_children: int,
        memory_hint: str | None = None,
    ) -> list[tuple[dict[str, Any], bytes]]:
        """``run`` on up to ``max_children`` children at once, one reply each, in order.

        The first child is waited for as in ``run``; the others are children idle at this moment,
        then new ones while the pool has room (their start is not charged to ``wall_seconds``),
        never a busy one waited for, so a busy pool serves the request as ``run`` would. With
        more than one child, each request carries ``"part": [index, count]`` and the op shares
        the work out by it; each child keeps its own CPU and memory limits, and every reply is in
        by the same wall deadline. Raises as ``run`` does when any child fails.
        """
        cpu_seconds, wall_seconds = clamped(cpu_seconds, wall_seconds)
        children = [self._acquire(time.monotonic() + wall_seconds)]
        children += self._take_more(max_children - 1)
        deadline = time.monotonic() + wall_seconds
        replies: list[tuple[dict[str, Any], bytes]] = []
        child = children[0]
        metrics.SANDBOX_BUSY.inc(len(children))
        try:
            for index, child in enumerate(children):
                part = {"part": [index, len(children)]} if len(children) > 1 else {}
                header = json.dumps({"op": op, "cpu_seconds": cpu_seconds, **args, **part}).encode()
                child.send(header, payload, deadline)
            for child in children:
                raw_header, data = child.receive(deadline, max_reply_bytes)
                reply = json.loads(raw_header)
                if not isinstance(reply, dict):
                    raise ChildMisbehaved("reply header is not an object")
                replies.append((reply, data))
        except ChildTimedOut:
            metrics.SANDBOX_KILLS.labels(Outcome.FILTER_TIMEOUT.value).inc()
            raise FetchError(
                Outcome.FILTER_TIMEOUT, f"{subject} took longer than {wall_seconds:.1f} s", hint
            ) from None
        except ChildEnded:
            status = child.end_status()
            outcome, reason = ending(status, cpu_seconds)
            metrics.SANDBOX_KILLS.labels(outcome.value).inc()
            log = logger.error if outcome is Outcome.INTERNAL else logger.warning
            log("sandbox child for %s %s (exit status %s)", op, reason, status)
            why = outcome_hint(outcome, hint, memory_hint)
            raise FetchError(outcome, f"{subject} {reason}", why) from None
        except (ChildMisbehaved, ValueError) as exc:
            logger.error("sandbox child for %s broke the protocol: %s", op, exc)
            metrics.SANDBOX_KILLS.labels(Outcome.INTERNAL.value).inc()
            raise FetchError(
                Outcome.INTERNAL, f"{subject} failed", "Retry later; this is a fault in sift."
            ) from None
        finally:
            metrics.SANDBOX_BUSY.dec(len(children))
            # A child whose reply was not read (another one failed first) is mid-request: replaced.
            for index, each in enumerate(children):
                answered = index < len(replies) and replies[index][0].get("error") != "memory"
                self._release(each, reusable=answered)
        if any(reply.get("error") == "memory" for reply, _ in replies):
            metrics.SANDBOX_KILLS.labels(Outcome.MEMORY_LIMIT.value).inc()
            raise FetchError(
                Outcome.MEMORY_LIMIT,
                f"{subject} ran out of memory",
                outcome_hint(Outcome.MEMORY_LIMIT, hint, memory_hint),
            )
        return replies

    def _take_more(self, most: int) -> list[Child]:
        """Up to ``most`` more children: idle ones, then new ones while the pool has room (all
        started at once), never waiting for a busy one."""
        taken = self._take_idle(most)
        with self._cond:
            places = max(0, min(most - len(taken), self.size - self._live))
            self._live += places
        return taken + [child for child in self._start_children(places) if child is not None]

    def _take_idle(self, most: int) -> list[Child]:
        """Up to ``most`` idle children, without waiting for one or starting one."""
        taken: list[Child] = []
        with self._cond:
            while self._idle and len(taken) < most:
                child = self._idle.pop()
                if child.alive:
                    taken.append(child)
                    continue
                self._live -= 1
                self._children.discard(child)
                child.stop()
        return taken

    def _acquire(self, deadline: float) -> Child:
        with self._cond:
            while True:
                while self._idle:
                    child = self._idle.pop()
                    if child.alive:
                        return child
                    self._live -= 1
                    self._children.discard(child)
                    child.stop()
                if self._live < self.size:
                    self._live += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._cond.wait(remaining):
                    raise FetchError(
                        Outcome.BUSY,
                        "every document parser of this worker is in use",
                        "Retry in a few seconds.",
                        retry_after=RetryAfter.PARSER,
                    )
        return self._start()

    def _start(self) -> Child:
        """A new child in the place the caller has taken; ``internal`` if it cannot start."""
        (child,) = self._start_children(1)
        if child is None:
            raise FetchError(
                Outcome.INTERNAL, "cannot start a document parser", "Retry later; this is a fault in sift."
            )
        return child

    def _start_children(self, count: int) -> list[Child | None]:
        """``count`` new children, started at once in places the caller has taken; None for each
        that could not start (its place given back)."""
        started: list[Child | None] = []
        for _ in range(count):
            try:
                started.append(Child(self.memory_bytes, handed_on(settings.LOG_FORMAT, settings.LOG_LEVEL)))
            except OSError as exc:
                logger.error("cannot start a sandbox child: %r", exc)
                started.append(None)
        deadline = time.monotonic() + SANDBOX_START_SECONDS
        for index, child in enumerate(started):
            if child is not None:
                try:
                    child.wait_ready(deadline)
                    with self._cond:
                        self._children.add(child)
                    continue
                except (ChildTimedOut, ChildEnded, ChildMisbehaved) as exc:
                    child.stop()
                    logger.error("cannot start a sandbox child: %r", exc)
            started[index] = None
            self._release(None, reusable=False)
        return started

    def _release(self, child: Child | None, reusable: bool) -> None:
        keep = child is not None and reusable and child.requests < SANDBOX_REQUESTS_PER_CHILD
        with self._cond:
            if child is not None and keep:
                child.idle_since = time.monotonic()
                self._idle.append(child)
                if self._idle_watch is None:
                    self._idle_watch = threading.Thread(
                        target=self._stop_idle_children, name="sandbox-idle", daemon=True
                    )
                    self._idle_watch.start()
            else:
                self._live -= 1
                if child is not None:
                    self._children.discard(child)
            self._cond.notify()
        if child is not None and not keep:
            child.stop()

    def _stop_idle_children(self) -> None:
        """Stop the children idle for ``idle_seconds``, oldest first, all but ``kept_warm``; end
        when none is left that could be (the next release starts this again). A child leaves the
        idle list under the pool's lock before it is stopped, and a parse takes one only from that
        list under the same lock: a child is either taken or stopped, never both."""
        while True:
            with self._cond:
                cutoff = time.monotonic() - self.idle_seconds
                spare = self._idle[: max(0, len(self._children) - self.kept_warm)]
                expired = [child for child in spare if child.idle_since <= cutoff]  # oldest: a prefix
                del self._idle[: len(expired)]
                self._live -= len(expired)
                self._children.difference_update(expired)
                later = spare[len(expired) :]
                if not later:
                    self._idle_watch = None
            for child in expired:
                child.stop()
            if not later:
                return
            time.sleep(max(0.0, later[0].idle_since + self.idle_seconds - time.monotonic()))

    def pids(self) -> list[int]:
        """Process ids of this pool's children (for benchmarks that read their CPU time)."""
        with self._cond:
            return sorted(child.proc.pid for child in self._children)

    def warm_up(self, children: int | None = None) -> None:
        """Start ``children`` children (all by default) now rather than on first use; this many
        stay when idle, so that a fetch after a quiet period does not wait for a child either."""
        count = min(children or self.size, self.size)
        with self._cond:
            self.kept_warm = max(self.kept_warm, count)
        started = [self._acquire(time.monotonic() + 30) for _ in range(count)]
        for child in started:
            self._release(child, reusable=True)

    def close(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._children.difference_update(idle)
        for child in idle:
            child.stop()

    def forget_after_fork(self) -> None:
        for child in self._children:
            child.forget()
        self._children.clear()
        self._idle = []


_instance: Sandbox | None = None
_instance_lock = threading.Lock()


def get_sandbox() -> Sandbox:
    """This process's sandbox, created on first use."""
    global _instance  # noqa: PLW0603 — one pool per process, by design
    with _instance_lock:
        if _instance is None:
            _instance = Sandbox()
        return _instance


def warm_up(children: int | None = None) -> None:
    """Start ``children`` of this process's children (all by default) now, not on first use (from
    a web worker's start-up hook: one)."""
    get_sandbox().warm_up(children)


def shutdown() -> None:
    """Stop this process's idle children (at exit, and in tests)."""
    global _instance
    with _instance_lock:
        sandbox, _instance = _instance, None
    if sandbox is not None:
        sandbox.close()


def _after_fork_in_child() -> None:
    # The children belong to the parent process; a forked worker must not share their pipes.
    global _instance, _instance_lock  # noqa: PLW0603
    _instance_lock = threading.Lock()
    if _instance is not None:
        _instance.forget_after_fork()
    _instance = None


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(shutdown)
