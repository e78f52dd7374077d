"""Rendering (docs/rendering.md): a page's scripts run in headless Chromium, every request of the
page fetched by sift's guarded client.

The browser lives in the machine's one render process (``server.py``, started and stopped
by ``render_process.py``). Web and cluster processes hand it renders over its Unix socket
(``SIFT_RENDER_SOCKET``), one connection each, and answer the page's requests with
``client.download``, a few at a time. This side enforces the render's deadline and watches the
memory of the render process's tree: past either, the browser's tree is killed and the next
render starts a new one.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, suppress
from typing import Any

from django.conf import settings

from capacity.slots import SlotTable
from fetch import client, gate, limits, metrics
from fetch.errors import FetchError
from fetch.models import RenderSlot
from fetch.outcomes import Outcome, RetryAfter
from fetch.render.server_process import START_SECONDS, RenderCrashed, connect, stop_server
from fetch.sandbox.proctree import tree_over

logger = logging.getLogger(__name__)
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
POLL_SECONDS = 0.25
# A page's subrequests fetched at once, each through the guard, per render.
PARALLEL_FETCHES = 4


def available() -> bool:
    return os.access(settings.SIFT_RENDER_CHROMIUM, os.X_OK)


def require_browser() -> None:
    if not available():
        raise FetchError(
            Outcome.UNSUPPORTED,
            "rendering is not available here: this server has no Chromium",
            "Send the target without render, or ask the operator to install Chromium.",
        )


RENDER_GATE = gate.Gate(
    SlotTable(RenderSlot, holder="holder", empty="", caller="caller"),
    lambda: settings.SIFT_RENDER_SLOTS,
    lambda: None,  # a render holds a fetch slot too, which counts in the caller's share
    "render",
    RetryAfter.PARSER,
)


def render_lease_seconds() -> float:
    """How long a render may hold its slots: the longest path through them (the document's
    download in its fetch slot, the wait for a render slot, a render and its crash retry, each
    with its start and the stop of a render process that ran out of time,
    ``limits.longest_render_seconds``), and a margin. Every step of that path has its own bound,
    so the lease outlasts the holder."""
    longest = limits.longest_render_seconds(
        float(settings.SIFT_FETCH_TIMEOUT), float(settings.SIFT_RENDER_TIMEOUT)
    )
    return longest + gate.LEASE_MARGIN_SECONDS


def render_slot(caller: str) -> AbstractContextManager[int]:
    """One of ``RENDER_SLOTS`` places a browser may render in, deployment-wide, held for
    ``caller``, like the fetch gate."""
    return RENDER_GATE.slot(caller, render_lease_seconds())


def render(document: client.Download) -> str:
    """The DOM of ``document`` after its scripts ran; ``RenderCrashed`` if the browser died.

    It ends within ``START_SECONDS`` (reaching a render process, started if need be, and its
    browser ready), ``SIFT_RENDER_TIMEOUT`` (the render) and, past either, the stop of the render
    process (``limits.RENDER_STOP_SECONDS``): the render slot's lease counts on it. Each render
    is counted by its outcome, and each browser it stopped or found dead by why.
    """
    try:
        html = _render(document)
    except RenderCrashed:
        metrics.RENDERS.labels("crashed").inc()
        metrics.BROWSER_RESTARTS.labels("crashed").inc()
        raise
    except FetchError as exc:
        metrics.RENDERS.labels(exc.outcome.value).inc()
        raise
    metrics.RENDERS.labels("ok").inc()
    return html


def _render(document: client.Download) -> str:
    start_by = time.monotonic() + START_SECONDS
    conversation = _Conversation(*connect(start_by), start_by)
    try:
        conversation.send(
            {
                "chromium": settings.SIFT_RENDER_CHROMIUM,
                "url": document.final_url,
                "content_type": _content_type(document),
                "timeout_ms": int(float(settings.SIFT_RENDER_TIMEOUT) * 1000),
            },
            document.body,
        )
        conversation.listen()
        return conversation.run()
    except FetchError as exc:
        if exc.outcome == Outcome.TIMEOUT or conversation.over_memory:
            stop_server()  # every process under the render process, and it too unless it is the line
            reason = "memory" if conversation.over_memory else "timeout"
            metrics.BROWSER_RESTARTS.labels(reason).inc()
            logger.warning("render: the browser was stopped (%s); the next render starts it again", reason)
        raise
    finally:
        conversation.close()


class _Conversation:
    """One render's connection: frames in on a reader thread, subrequests fetched on a pool."""

    def __init__(self, sock: socket.socket, pid: int, deadline: float) -> None:
        self.sock, self.pid, self.deadline = sock, pid, deadline
        self.writing = threading.Lock()
        self.frames: queue.Queue[tuple[dict[str, Any], bytes] | None] = queue.Queue()
        self.fetchers = ThreadPoolExecutor(PARALLEL_FETCHES, thread_name_prefix="render-fetch")
        self.over_memory = False
        self.started = False

    def listen(self) -> None:
        """The reader thread and a first fetch thread, started once the job is sent: their
        starts (a wait for the GIL each, up to ms on a busy process) overlap the render
        process's reading of the job, not a subrequest's wait."""
        threading.Thread(target=self._read, daemon=True).start()
        self.fetchers.submit(_nothing)

    def send(self, header: dict[str, Any], body: bytes = b"") -> None:
        if body:
            header = {**header, "size": len(body)}
        try:
            with self.writing:
                self.sock.sendall(json.dumps(header).encode() + b"\n" + body)
        except OSError:
            raise RenderCrashed("the render process went away") from None

    def _read(self) -> None:
        try:
            with self.sock.makefile("rb") as stream:
                while frame := _read_frame(stream):
                    if "fetch" in frame[0]:  # at once, not after the loop's memory check
                        with suppress(RuntimeError):  # the pool is shut: the render ended
                            self.fetchers.submit(self._answer, frame[0])
                    else:
                        self.frames.put(frame)
        except (OSError, ValueError):
            pass
        self.frames.put(None)

    def run(self) -> str:
        checked = 0.0
        while True:
            now = time.monotonic()
            if now >= self.deadline and not self.started:
                raise FetchError(
                    Outcome.TIMEOUT,
                    f"the browser did not start within {START_SECONDS:.0f}s",
                    "The server is overloaded; retry later, or fetch the page without render.",
                )
            if now >= self.deadline:
                raise FetchError(
                    Outcome.TIMEOUT,
                    f"the page did not finish rendering within {settings.SIFT_RENDER_TIMEOUT:.0f}s",
                    "The page's scripts run too long; fetch it without render, or retry later.",
                )
            if now - checked >= POLL_SECONDS:
                checked = now
                if tree_over(self.pid, settings.SIFT_RENDER_MAX_MEMORY):
                    self.over_memory = True
                    raise _out_of_memory("the browser held more memory than a render may")
            try:
                frame = self.frames.get(timeout=min(POLL_SECONDS, self.deadline - now))
            except queue.Empty:
                continue
            if frame is None:
                raise RenderCrashed("the render process ended without an answer")
            header, body = frame
            if header.get("started"):
                self.started = True
                self.deadline = time.monotonic() + float(settings.SIFT_RENDER_TIMEOUT)
                continue
            if header.get("html"):
                return body.decode("utf-8")
            if header.get("page_crashed"):
                raise _out_of_memory("the page's tab crashed, out of its script heap")
            if "failed" in header:
                raise RenderCrashed(str(header["failed"]))

    def _answer(self, request: dict[str, Any]) -> None:
        """The guarded client's answer to one request of the page, within the render's deadline."""
        left = min(float(settings.SIFT_FETCH_TIMEOUT), self.deadline - time.monotonic())
        try:
            if left <= 0:
                raise FetchError(Outcome.TIMEOUT, "past the render's deadline", "")
            download = client.download(str(request["fetch"]), timeout=left)
        except FetchError as exc:
            answer: dict[str, Any] = {"id": request["id"], "refused": exc.outcome}
            body = b""
        else:
            answer = {
                "id": request["id"],
                "status": download.status,
                "content_type": _content_type(download),
            }
            body = download.body
        with suppress(RenderCrashed):  # the render ended meanwhile
            self.send(answer, body)

    def close(self) -> None:
        self.fetchers.shutdown(wait=False, cancel_futures=True)
        with suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def _nothing() -> None:
    pass


def _content_type(download: client.Download) -> str:
    """The declared type with its charset, so the browser decodes the bytes as the site meant."""
    media = download.content_type or "application/octet-stream"
    return f"{media}; charset={download.charset}" if download.charset else media


def _read_frame(stream: Any) -> tuple[dict[str, Any], bytes] | None:
    line = stream.readline()
    if not line:
        return None
    header: dict[str, Any] = json.loads(line)
    size = int(header.get("size", 0))
    body = stream.read(size) if size else b""
    if len(body) < size:
        return None
    return header, body


MEMORY_HINT = "Fetch the page with render false: its text may need no scripts."


def _out_of_memory(what: str) -> FetchError:
    return FetchError(Outcome.MEMORY_LIMIT, f"{what}: the page's scripts allocate without end", MEMORY_HINT)
