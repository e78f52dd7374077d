"""Rendering (docs/rendering.md): a page's scripts run in headless Chromium, every request of the
page fetched by sift's guarded client.

The browser lives in one render process per machine (``render_server.py``), started on demand
by the first render with an environment of ``PATH`` (and Node's compile cache) only and, where
the platform allows, in a network namespace of its own; it ends by itself after
``SIFT_RENDER_IDLE`` without a render.
Web and cluster processes hand it renders over its Unix socket (``SIFT_RENDER_SOCKET``), one
connection each, and answer the page's requests with ``client.download``, a few at a time. This
side enforces the render's deadline and watches the memory of the render process's tree: past
either, the whole tree is killed and the next render starts a new one.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, suppress
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings

from capacity.slots import SlotTable
from fetch import client, gate, limits
from fetch.errors import FetchError
from fetch.models import RenderSlot
from fetch.outcomes import Outcome, RetryAfter
from fetch.proctree import alive as _alive
from fetch.proctree import tree_over
from fetch.proctree import tree_pids as _tree_pids

SERVER = Path(__file__).with_name("render_server.py")
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
POLL_SECONDS = 0.25
# A page's subrequests fetched at once, each through the guard, per render.
PARALLEL_FETCHES = 4
# How long a render may take to reach a render process (started if none listens: Python and
# Playwright's import) and have its browser and context ready (the browser's launch): the render's
# own deadline starts after that. Stopping a render process asks it its pid for this long at most.
START_SECONDS = limits.RENDER_START_SECONDS
PROBE_SECONDS = 2.0
# How long a stopped render process's tree may take to go after SIGKILL.
KILL_WAIT_SECONDS = 5.0
UNSHARE = shutil.which("unshare") or "/usr/bin/unshare"
NAMESPACE_COMMAND = [UNSHARE, "--user", "--map-root-user", "--net", "--"]
logger = logging.getLogger(__name__)
_last_pid: list[int] = []


class RenderCrashed(Exception):
    """The browser or the render process died before answering; the render may be tried again."""


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
    SlotTable(RenderSlot, holder="holder", empty=""),
    lambda: settings.SIFT_RENDER_SLOTS,
    "render",
    RetryAfter.PARSER,
)


def render_lease_seconds() -> float:
    """How long a render may hold its slots: the longest path through them (the wait for a fetch
    slot, the document's download, a render and its crash retry, each with its start and the
    stop of a render process that ran out of time, ``limits.longest_render_seconds``), and a
    margin. Every step of that path has its own bound, so the lease outlasts the holder."""
    longest = limits.longest_render_seconds(
        float(settings.SIFT_FETCH_TIMEOUT), float(settings.SIFT_RENDER_TIMEOUT)
    )
    return longest + gate.LEASE_MARGIN_SECONDS


def render_slot() -> AbstractContextManager[int]:
    """One of ``RENDER_SLOTS`` places a browser may render in, deployment-wide, like the fetch gate."""
    return RENDER_GATE.slot(render_lease_seconds())


@cache
def namespace_possible() -> bool:
    """Whether this platform lets an unprivileged process have a network namespace of its own."""
    try:
        done = subprocess.run([*NAMESPACE_COMMAND, "true"], capture_output=True, timeout=10, check=False)  # noqa: S603
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def network_mode() -> str:
    """``namespace`` (the browser has no route at all) or ``proxy`` (the fail-closed proxy only)."""
    return "namespace" if settings.SIFT_RENDER_NAMESPACE and namespace_possible() else "proxy"


def render(document: client.Download) -> str:
    """The DOM of ``document`` after its scripts ran; ``RenderCrashed`` if the browser died.

    It ends within ``START_SECONDS`` (reaching a render process, started if need be, and its
    browser ready), ``SIFT_RENDER_TIMEOUT`` (the render) and, past either, the stop of the render
    process (``limits.RENDER_STOP_SECONDS``): the render slot's lease counts on it.
    """
    start_by = time.monotonic() + START_SECONDS
    conversation = _Conversation(*_connect(start_by), start_by)
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
            stop_server()  # the render process and every process under it
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


# --- the render process -----------------------------------------------------------------------


def start_soon() -> None:
    """Start the render process, unless its socket is there, while the caller downloads the page
    to render: the browser's start overlaps the download (``render`` waits for it, never twice)."""
    if not Path(settings.SIFT_RENDER_SOCKET).exists():
        until = time.monotonic() + START_SECONDS
        threading.Thread(target=_start_server, args=(until,), daemon=True, name="render-start").start()


def _connect(until: float) -> tuple[socket.socket, int]:
    """A connection to the render process, which is started if none listens; and its pid; by
    ``until`` (a ``time.monotonic()`` value) or ``RenderCrashed``."""
    for _ in range(3):
        connected = _try_connect(until)
        if connected is not None:
            return connected
        _start_server(until)
    raise RenderCrashed("the render process did not start")


def _try_connect(until: float) -> tuple[socket.socket, int] | None:
    left = until - time.monotonic()
    if left <= 0:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(left)
        sock.connect(settings.SIFT_RENDER_SOCKET)
        hello = b""
        while not hello.endswith(b"\n"):
            chunk = sock.recv(1)
            if not chunk:
                raise ConnectionError("the render process closed the connection")
            hello += chunk
        sock.settimeout(None)
        pid = int(json.loads(hello)["pid"])
    except (OSError, ValueError, KeyError):
        sock.close()
        return None
    _last_pid[:] = [pid]
    return sock, pid


def _start_server(until: float) -> None:
    path = Path(settings.SIFT_RENDER_SOCKET)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(f"{path}.lock", "w") as lock:
        if not _lock_by(lock.fileno(), until):  # one starter at a time, machine-wide
            return
        probe = _try_connect(until)
        if probe is not None:
            probe[0].close()
            return
        path.unlink(missing_ok=True)
        mode = network_mode()
        idle = str(float(settings.SIFT_RENDER_IDLE))
        command = [sys.executable, "-I", str(SERVER), str(path), idle, settings.SIFT_RENDER_CHROMIUM]
        process = subprocess.Popen(  # noqa: S603 — our own script, run by our own interpreter
            [*NAMESPACE_COMMAND, *command] if mode == "namespace" else command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Node keeps the driver's compiled code beside the socket: its next start is ~0.2 s shorter.
            env={"PATH": "/usr/bin:/bin", "NODE_COMPILE_CACHE": str(path.parent / "node-compile-cache")},
            start_new_session=True,
            cwd="/",
        )
        threading.Thread(target=process.wait, daemon=True).start()  # reaped when it ends
        while not path.exists() and process.poll() is None and time.monotonic() < until:
            time.sleep(0.005)
        logger.info(
            "render process %s started; its browser: %s; its network: %s",
            process.pid,
            settings.SIFT_RENDER_CHROMIUM,
            mode,
        )


def _lock_by(descriptor: int, until: float) -> bool:
    """Whether the exclusive lock on ``descriptor`` was had by ``until``."""
    while True:
        with suppress(BlockingIOError):
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        if time.monotonic() >= until:
            return False
        time.sleep(0.02)


def running_pids() -> set[int]:
    """The render process, if the last one this process talked to still runs."""
    return {pid for pid in _last_pid if _alive(pid)}


def stop_server() -> None:
    """Kill the machine's render process, if one listens, with every process under it; within
    ``limits.RENDER_STOP_SECONDS``."""
    probe = _try_connect(time.monotonic() + PROBE_SECONDS)  # learns the pid of one another process started
    if probe is not None:
        probe[0].close()
    for pid in running_pids():
        for member in _tree_pids(pid):
            try:
                os.kill(member, signal.SIGKILL)
            except OSError:
                continue
        give_up = time.monotonic() + KILL_WAIT_SECONDS
        while _alive(pid) and time.monotonic() < give_up:
            time.sleep(0.02)
    _last_pid.clear()
