"""Request threads of this process, lent out per caller (``docs/decisions.md``, "Bounded waits").

Under ASGI every synchronous request runs in a thread of its own and, on PostgreSQL, holds a
connection of the process's pool until it answers. A request that may hold them for long (a
``?wait=`` on a job, a fetch waiting for the gate and then for a slow site) takes a share first:
at most so many per caller, and for some kinds so many in all, so that one caller can never take
every connection and stall ``/healthz`` and everyone else. What a request does when it gets no
share is its own business: a wait answers at once, a fetch is refused busy, a submit's callback
check is refused ``caller_busy``. A share is usually given back when its request answers; a
callback check's, when its lookup ends (``doors/callbacks.py``).

The shares are per process on purpose: what they protect (a process's threads and connections)
is per process too, so they need no database and cost nothing when the process dies.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class ThreadShares:
    """At most ``per_caller()`` shares per caller and ``total()`` in all (read at each request)."""

    def __init__(self, per_caller: Callable[[], int], total: Callable[[], int | None]) -> None:
        self._per_caller = per_caller
        self._total = total
        self._lock = threading.Lock()
        self._held: Counter[int] = Counter()

    def take(self, caller_id: int) -> bool:
        """Take a share for ``caller_id`` if one is free; whoever got it must ``give_back`` it."""
        with self._lock:
            total = self._total()
            granted = self._held[caller_id] < self._per_caller() and (
                total is None or self._held.total() < total
            )
            if granted:
                self._held[caller_id] += 1
        return granted

    def held(self, caller_id: int) -> int:
        with self._lock:
            return self._held[caller_id]

    def give_back(self, caller_id: int) -> None:
        with self._lock:
            self._held[caller_id] -= 1
            if not self._held[caller_id]:
                del self._held[caller_id]

    @contextmanager
    def share(self, caller_id: int) -> Iterator[bool]:
        """Yield whether this request got a share; it is given back on exit."""
        granted = self.take(caller_id)
        try:
            yield granted
        finally:
            if granted:
                self.give_back(caller_id)
