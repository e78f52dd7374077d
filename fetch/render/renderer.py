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
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from capacity.slots import SlotTable
from fetch import client, gate, limits, metrics
from fetch.errors import FetchError
from fetch.models import RenderSlot
from fetch.options import TargetOptions
from fetch.outcomes import Outcome, RetryAfter
from fetch.render.server_process import ABANDON_SECONDS, START_SECONDS, RenderCrashed, connect, stop_server
from fetch.render.subrequests import Subrequests, content_type
from fetch.sandbox.proctree import tree_over

logger = logging.getLogger(__name__)
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
POLL_SECONDS = 0.25


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


@dataclass(frozen=True)
class Screenshot:
    kind: str  # viewport or full
    media_type: str
    width: int
    height: int
    data: bytes


@dataclass(frozen=True)
class Rendering:
    """The DOM after the page's scripts ran and a person's work on it (docs/rendering.md), what
    was done to its consent banner (``rejected``, ``accepted``, ``removed`` or None) and the
    picture asked for; what the subrequest bounds refused."""

    html: str
    consent: str | None = None
    screenshot: Screenshot | None = None
    cut: dict[str, Any] | None = None  # what the subrequest bounds refused (None: nothing)


def browser_work(options: TargetOptions) -> dict[str, Any]:
    """What the render process is asked to do on the page beside reading it (a stored target's
    steps are plain dicts: ``Target.from_stored``)."""
    steps = [step if isinstance(step, dict) else step.model_dump() for step in options.actions or ()]
    return {"consent": options.consent, "actions": steps, "screenshot": options.screenshot}


def render(document: client.Download, options: TargetOptions | None = None) -> Rendering:
    """``document`` rendered: its scripts run, then ``options``' consent, actions and screenshot
    (``browser_work``); ``RenderCrashed`` if the browser died.

    It ends within ``START_SECONDS`` (reaching a render process, started if need be, and its
    browser ready), ``SIFT_RENDER_TIMEOUT`` (the render) and, past either, the stop of the render
    process (``limits.RENDER_STOP_SECONDS``): the render slot's lease counts on it. A render past
    its deadline is first given up alone (its context closed, the browser's other renders left to
    run); only when that does not happen in time, or past the memory cap, is the tree killed.
    Each render is counted by its outcome, and each browser it stopped or found dead by why.
    """
    try:
        rendering = _render(document, options or TargetOptions())
    except RenderCrashed:
        metrics.RENDERS.labels("crashed").inc()
        metrics.BROWSER_RESTARTS.labels("crashed").inc()
        raise
    except FetchError as exc:
        metrics.RENDERS.labels(exc.outcome.value).inc()
        raise
    metrics.RENDERS.labels("ok").inc()
    return rendering


def _render(document: client.Download, options: TargetOptions) -> Rendering:
    start_by = time.monotonic() + START_SECONDS
    conversation = _Conversation(*connect(start_by), start_by)
    try:
        conversation.send(
            {
                "chromium": settings.SIFT_RENDER_CHROMIUM,
                "url": document.final_url,
                "content_type": content_type(document),
                "timeout_ms": int(float(settings.SIFT_RENDER_TIMEOUT) * 1000),
                **browser_work(options),
            },
            document.body,
        )
        conversation.listen()
        return conversation.run()
    except FetchError as exc:
        timed_out = exc.outcome == Outcome.TIMEOUT
        if conversation.over_memory or (timed_out and not conversation.abandon()):
            stop_server()  # every process under the render process, and it too unless it is the line
            reason = "memory" if conversation.over_memory else "timeout"
            metrics.BROWSER_RESTARTS.labels(reason).inc()
            logger.warning("render: the browser was stopped (%s); the next render starts it again", reason)
        raise
    finally:
        conversation.close()


class _Conversation:
    """One render's connection: frames in on a reader thread, subrequests fetched within their
    bounds (``subrequests.py``)."""

    def __init__(self, sock: socket.socket, pid: int, deadline: float) -> None:
        self.sock, self.pid, self.deadline = sock, pid, deadline
        self.writing = threading.Lock()
        self.frames: queue.Queue[tuple[dict[str, Any], bytes] | None] = queue.Queue()
        self.subrequests = Subrequests(self._send_answer, lambda: self.deadline - time.monotonic())
        self.over_memory = False
        self.started = False
        self.screenshot: Screenshot | None = None

    def listen(self) -> None:
        """The reader thread and a first fetch thread, started once the job is sent: their
        starts (a wait for the GIL each, up to ms on a busy process) overlap the render
        process's reading of the job, not a subrequest's wait."""
        threading.Thread(target=self._read, daemon=True).start()
        self.subrequests.warm()

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
                        self.subrequests.submit(frame[0])
                    else:
                        self.frames.put(frame)
        except (OSError, ValueError):
            pass
        self.frames.put(None)

    def run(self) -> Rendering:
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
                return Rendering(
                    body.decode("utf-8"), header.get("consent"), self.screenshot, self.subrequests.cut()
                )
            if header.get("screenshot"):
                self.screenshot = Screenshot(
                    header["screenshot"], header["type"], int(header["width"]), int(header["height"]), body
                )
                continue
            _raise_refusal(header)
            if header.get("page_crashed"):
                raise _out_of_memory("the page's tab crashed, out of its script heap")
            if "failed" in header:
                raise RenderCrashed(str(header["failed"]))

    def _send_answer(self, header: dict[str, Any], body: bytes) -> None:
        with suppress(RenderCrashed):  # the render ended meanwhile
            self.send(header, body)

    def abandon(self) -> bool:
        """Give the render up in the render process: its context closed, only its. Whether the
        render process said so within ``ABANDON_SECONDS`` (never before the browser started)."""
        if not self.started:
            return False
        with suppress(RenderCrashed):
            self.send({"abandon": True})
            until = time.monotonic() + ABANDON_SECONDS
            while (left := until - time.monotonic()) > 0:
                try:
                    frame = self.frames.get(timeout=left)
                except queue.Empty:
                    return False
                if frame is None:
                    return False
                if "abandoned" in frame[0]:
                    return frame[0]["abandoned"] is True
        return False

    def close(self) -> None:
        self.subrequests.close()
        with suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def _raise_refusal(header: dict[str, Any]) -> None:
    """A render that ended on the caller's request: a step that could not be done, a picture too
    large. Never tried again."""
    if "action_failed" in header:
        index = int(header["action_failed"])
        raise FetchError(
            Outcome.ACTION_FAILED,
            f"actions[{index}] failed: {header.get('reason', 'the step could not be done')}",
            f"Step {index} (counted from 0) of actions could not be done on the rendered page: "
            "check its CSS selector against the page, wait_for its element first, or leave it out.",
            action=index,
        )
    if "too_large" in header:
        raise FetchError(
            Outcome.TOO_LONG,
            f"the screenshot could not be made small enough: {header['too_large']}",
            'Ask for screenshot "viewport" instead of "full".',
        )


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
