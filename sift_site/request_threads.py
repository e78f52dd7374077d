"""The web process's request threads: each request's synchronous code runs in one thread, as
Django's ASGI handler runs it, but in a thread kept from request to request (``sift_site/asgi.py``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext

# Idle request threads kept for the next requests; a burst beyond them ends the extra ones.
IDLE_THREADS = 16


class RequestThreads:
    """Run each HTTP request's synchronous code in one thread, as Django does, but a kept one.

    Django's handler makes a thread for every request (and another to join it at the end) and
    the event loop waits for each to start. Here each request takes an idle one-thread executor,
    made only when none is idle, and gives it back once Django has answered and closed the
    request; one that ended in an error or a cancellation may still be running the request's
    code and is ended instead. A request thread's connection goes back to the pool (or is kept
    per ``CONN_MAX_AGE`` on SQLite) at the request's end, as under a threaded WSGI server.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.idle: list[ThreadPoolExecutor] = []  # touched by the event loop's thread only

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        executor = self.idle.pop() if self.idle else ThreadPoolExecutor(1, thread_name_prefix="sift-request")
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.app(scope, receive, send)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        if len(self.idle) < IDLE_THREADS:
            self.idle.append(executor)
        else:
            executor.shutdown(wait=False)
