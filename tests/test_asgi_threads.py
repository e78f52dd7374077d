"""The web process's request threads (``sift_site.request_threads``): each request's
synchronous code runs in one thread, a kept one, never shared by two requests at once."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sift_site import request_threads


class Recorder:
    """An ASGI app that notes the thread of each synchronous call a request makes, as Django's
    handler makes several (the request's signals, the middleware chain, closing the response)."""

    def __init__(self, calls: int = 3, fail: bool = False, hold: asyncio.Event | None = None) -> None:
        self.calls, self.fail, self.hold = calls, fail, hold
        self.threads: list[set[int]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen: set[int] = set()
        self.threads.append(seen)
        for _ in range(self.calls):
            seen.add(await sync_to_async(threading.get_ident)())
            if self.hold is not None:
                await self.hold.wait()
        if self.fail:
            raise RuntimeError("the request failed")


def run(app: request_threads.RequestThreads, scope_type: str = "http") -> None:
    asyncio.run(app({"type": scope_type}, None, None))


def test_a_request_runs_in_one_thread_and_the_next_request_reuses_it():
    recorder = Recorder()
    app = request_threads.RequestThreads(recorder)

    async def two_requests() -> None:
        await app({"type": "http"}, None, None)
        await app({"type": "http"}, None, None)

    asyncio.run(two_requests())

    first, second = recorder.threads
    assert len(first) == 1
    assert first == second
    assert threading.get_ident() not in first


def test_requests_at_the_same_time_run_in_threads_of_their_own():
    async def two_at_once() -> None:
        hold = asyncio.Event()
        recorder = Recorder(calls=2, hold=hold)
        app = request_threads.RequestThreads(recorder)
        both = asyncio.gather(app({"type": "http"}, None, None), app({"type": "http"}, None, None))
        await asyncio.sleep(0.05)
        hold.set()
        await both
        first, second = recorder.threads
        assert len(first) == len(second) == 1
        assert first != second
        assert len(app.idle) == 2

    asyncio.run(two_at_once())


def test_a_request_that_failed_gives_its_thread_to_no_other():
    failing = Recorder(fail=True)
    app = request_threads.RequestThreads(failing)

    async def failed_then_fine() -> None:
        with pytest.raises(RuntimeError):
            await app({"type": "http"}, None, None)
        assert app.idle == []
        app.app = fine = Recorder()
        await app({"type": "http"}, None, None)
        assert fine.threads[0] != failing.threads[0]

    asyncio.run(failed_then_fine())


def test_idle_threads_are_kept_up_to_a_bound():
    async def burst() -> None:
        hold = asyncio.Event()
        app = request_threads.RequestThreads(Recorder(calls=1, hold=hold))
        requests = asyncio.gather(
            *(app({"type": "http"}, None, None) for _ in range(request_threads.IDLE_THREADS + 4))
        )
        await asyncio.sleep(0.05)
        hold.set()
        await requests
        assert len(app.idle) == request_threads.IDLE_THREADS

    asyncio.run(burst())


def test_other_scopes_pass_through_without_a_thread():
    recorder = Recorder(calls=0)
    app = request_threads.RequestThreads(recorder)
    run(app, "lifespan")
    assert recorder.threads == [set()]
    assert app.idle == []
