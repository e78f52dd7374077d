"""A download's deadline: the total time of one download, enforced on its sockets.

``fetch/client.py`` opens every download inside a ``Deadline`` and through ``HTTPPool`` /
``HTTPSPool``, whose connections register their sockets with the deadline in force.
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import itertools
import os
import socket
import threading
import time
from types import TracebackType

from urllib3 import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.connection import HTTPConnection, HTTPSConnection

from fetch.errors import FetchError
from fetch.outcomes import Outcome


class Deadline:
    """The total time of one download, enforced by shutting its sockets down when it runs out.

    A read blocked in the kernel cannot look at a clock, and a server that drips a byte a
    second never trips a per-read timeout; shutting the socket down from a timer thread is
    what wakes the read (one thread for every deadline of the process, ``_Watchdog``: a thread
    started for each download would wait for the GIL to start, in every download). A
    socket shut down this way can look like a clean end of body, so the reader asks
    ``check()`` after the last read.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expires = time.monotonic() + seconds
        self.fired = False
        self.done = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._token: contextvars.Token[Deadline | None] | None = None

    def __enter__(self) -> Deadline:
        self._token = _current_deadline.set(self)
        _WATCHDOG.watch(self)
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.done = True
        self.release()
        if self._token is not None:
            _current_deadline.reset(self._token)

    @property
    def expired(self) -> bool:
        return self.fired or time.monotonic() >= self.expires

    def remaining(self) -> float:
        return max(0.0, self.expires - time.monotonic())

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                _shutdown(sock)

    def release(self) -> None:
        """Forget the sockets before they are closed, so a late timer never touches a reused fd."""
        with self._lock:
            self._sockets.clear()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shutdown(sock)

    def error(self) -> FetchError:
        return FetchError(
            Outcome.TIMEOUT,
            f"the site did not finish answering within {self.seconds:g} s",
            "The site is too slow or stalled; retry later, or try another URL for the same content.",
        )

    def check(self) -> None:
        if self.expired:
            raise self.error()


class _Watchdog:
    """One daemon thread firing every deadline of the process when it expires, started by the
    first deadline in each process (again in a forked child, which has no thread of its parent's).
    A deadline that ended is dropped when its time comes."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._changed = threading.Condition()
        self._due: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._running = False

    def watch(self, deadline: Deadline) -> None:
        with self._changed:
            if not self._running:
                self._running = True
                threading.Thread(
                    target=self._run, args=(self._changed,), daemon=True, name="deadlines"
                ).start()
            heapq.heappush(self._due, (deadline.expires, next(self._order), deadline))
            self._changed.notify()

    def _run(self, changed: threading.Condition) -> None:
        with changed:
            while changed is self._changed:  # a forked child starts a watchdog of its own
                now = time.monotonic()
                while self._due and self._due[0][0] <= now:
                    deadline = heapq.heappop(self._due)[2]
                    if not deadline.done:
                        deadline._fire()
                changed.wait(self._due[0][0] - now if self._due else None)


_WATCHDOG = _Watchdog()

_current_deadline: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "sift_fetch_deadline", default=None
)


def _shutdown(sock: socket.socket) -> None:
    # The plain socket method on purpose: SSLSocket.shutdown would also drop its TLS state under
    # the reading thread's feet; shutting the descriptor down is enough to wake it. OSError: the
    # socket is already closed, so there is nothing left to wake.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _watch(sock: socket.socket | None) -> None:
    deadline = _current_deadline.get()
    if deadline is not None and sock is not None:
        deadline.watch(sock)


class WatchedHTTPConnection(HTTPConnection):
    def connect(self) -> None:
        super().connect()
        _watch(self.sock)


class WatchedHTTPSConnection(HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        _watch(self.sock)


class HTTPPool(HTTPConnectionPool):
    ConnectionCls = WatchedHTTPConnection


class HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = WatchedHTTPSConnection
