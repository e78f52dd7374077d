"""The finish line of a fetch's parses: requests sent to a sandbox child within ``finish_by``
end by the fetch's own deadline, however large their own budget (``pool.Sandbox.run``)."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager

# The least time a request to a child is given, even when the caller's finish line is past.
MIN_WALL_SECONDS = 0.2
_finish_by: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "sift_sandbox_finish_by", default=None
)


@contextmanager
def finish_by(deadline: float) -> Iterator[None]:
    """Requests sent to a child inside this block end by ``deadline`` (a ``time.monotonic()``
    value), however large their own budget: the answer to a fetch must not wait for a parser
    past the fetch's own deadline."""
    token = _finish_by.set(deadline)
    try:
        yield
    finally:
        _finish_by.reset(token)


def clamped(cpu_seconds: float, wall_seconds: float) -> tuple[float, float]:
    deadline = _finish_by.get()
    if deadline is None:
        return cpu_seconds, wall_seconds
    wall = min(wall_seconds, max(deadline - time.monotonic(), MIN_WALL_SECONDS))
    return min(cpu_seconds, wall), wall
