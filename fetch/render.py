"""Rendering (docs/rendering.md): a page's scripts run in headless Chromium, every request of the
page fetched by sift's guarded client.

The browser runs in a child process (``render_child.py``) started with an empty environment, so
Playwright's driver and Chromium never see sift's secrets. One child per process stays warm
between renders, each render in a fresh context; after a render that did not end well, the
child and all its descendants are killed, and the next render starts a new one. This side
answers the child's requests with ``client.download``, enforces the render's deadline and
watches the tree's memory. A child whose parent went reads the end of its stdin and stops.
"""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, Any

from django.conf import settings

from capacity.slots import SlotTable
from fetch import client, gate
from fetch.errors import FetchError
from fetch.models import RenderSlot
from fetch.outcomes import Outcome, RetryAfter

CHILD = Path(__file__).with_name("render_child.py")
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
POLL_SECONDS = 0.25
# The pids of the render children running now, so a test can find the browser to kill.
running: set[int] = set()


class RenderCrashed(Exception):
    """The browser or its child died before answering; the render may be tried again."""


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
    """How long a render may hold its slots: the document's download, then the render itself."""
    return float(settings.SIFT_FETCH_TIMEOUT + settings.SIFT_RENDER_TIMEOUT + gate.LEASE_MARGIN_SECONDS)


def render_slot() -> AbstractContextManager[int]:
    """One of ``RENDER_SLOTS`` places a browser may render in, deployment-wide, like the fetch gate."""
    return RENDER_GATE.slot(render_lease_seconds())


class _WarmBrowser:
    """This process's render child and its browser, kept between renders that end well.

    Any render that does not (timeout, memory, crash, a page that failed) kills the child with
    its whole tree, and the next render starts a new one. A process forked from one that had a
    child starts its own: the pipes of the parent's are not its to use.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.child: subprocess.Popen[bytes] | None = None
        self.owner = 0

    def take(self) -> subprocess.Popen[bytes]:
        if self.child is not None and (self.owner != os.getpid() or self.child.poll() is not None):
            if self.owner == os.getpid():
                self.retire()
            self.child = None
        if self.child is None:
            self.child = _start_child()
            self.owner = os.getpid()
        return self.child

    def retire(self) -> None:
        if self.child is not None and self.owner == os.getpid():
            running.discard(self.child.pid)
            _kill_tree(self.child)
        self.child = None


_warm = _WarmBrowser()


def _start_child() -> subprocess.Popen[bytes]:
    child = subprocess.Popen(  # noqa: S603 — our own script, run by our own interpreter
        [sys.executable, "-I", str(CHILD)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin"},
        start_new_session=True,
        cwd="/",
    )
    running.add(child.pid)
    return child


def render(document: client.Download) -> str:
    """The DOM of ``document`` after its scripts ran; ``RenderCrashed`` if the browser died."""
    timeout = float(settings.SIFT_RENDER_TIMEOUT)
    if not _warm.lock.acquire(timeout=timeout):
        raise FetchError(
            Outcome.BUSY,
            "this process's browser stayed busy with another render",
            f"Retry after {RetryAfter.PARSER} seconds.",
            retry_after=RetryAfter.PARSER,
        )
    try:
        deadline = time.monotonic() + timeout
        child = _warm.take()
        assert child.stdin is not None
        ended_well = False
        try:
            _send(
                child.stdin,
                {
                    "chromium": settings.SIFT_RENDER_CHROMIUM,
                    "url": document.final_url,
                    "content_type": document.content_type,
                    "body": base64.b64encode(document.body).decode("ascii"),
                    "timeout_ms": int(timeout * 1000),
                },
            )
            html = _converse(child, deadline)
            ended_well = True
            return html
        finally:
            if not ended_well:
                _warm.retire()
    finally:
        _warm.lock.release()


def _converse(child: subprocess.Popen[bytes], deadline: float) -> str:
    assert child.stdin is not None
    while True:
        message = _next_message(child, deadline)
        if "html" in message:
            return str(message["html"])
        if message.get("page_crashed"):
            raise _out_of_memory("the page's tab crashed, out of its script heap")
        if "failed" in message:
            raise RenderCrashed(str(message["failed"]))
        _send(child.stdin, _answer(str(message.get("fetch", "")), deadline))


def _next_message(child: subprocess.Popen[bytes], deadline: float) -> dict[str, Any]:
    assert child.stdout is not None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise FetchError(
                Outcome.TIMEOUT,
                f"the page did not finish rendering within {settings.SIFT_RENDER_TIMEOUT:.0f}s",
                "The page's scripts run too long; fetch it without render, or retry later.",
            )
        if _tree_rss(child.pid) > settings.SIFT_RENDER_MAX_MEMORY:
            raise _out_of_memory("the browser held more memory than a render may")
        ready, _, _ = select.select([child.stdout], [], [], min(POLL_SECONDS, remaining))
        if ready:
            line = child.stdout.readline()
            if not line:
                raise RenderCrashed("the browser process ended without an answer")
            message: dict[str, Any] = json.loads(line)
            return message


MEMORY_HINT = "Fetch the page with render false: its text may need no scripts."


def _out_of_memory(what: str) -> FetchError:
    return FetchError(Outcome.MEMORY_LIMIT, f"{what}: the page's scripts allocate without end", MEMORY_HINT)


def _answer(url: str, deadline: float) -> dict[str, Any]:
    """The guarded client's answer to one request of the page, given up at the render's deadline."""
    result: dict[str, Any] = {"refused": "no answer before the render's deadline"}

    def fetch() -> None:
        try:
            download = client.download(url)
        except FetchError as exc:
            result.update(refused=exc.outcome)
            return
        result.clear()
        result.update(
            status=download.status,
            content_type=download.content_type or "application/octet-stream",
            body=base64.b64encode(download.body).decode("ascii"),
        )

    worker = threading.Thread(target=fetch, daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    return dict(result) if not worker.is_alive() else {"refused": "timeout"}


def _send(pipe: IO[bytes], message: dict[str, Any]) -> None:
    try:
        pipe.write((json.dumps(message) + "\n").encode("utf-8"))
        pipe.flush()
    except (BrokenPipeError, OSError):
        raise RenderCrashed("the browser process went away") from None


def _tree_pids(root: int) -> set[int]:
    """``root`` and its descendants. Not its session: Playwright starts Chromium in one of its own."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses; the fields after its last ")" do not.
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree = {root}
    while grown := {pid for pid, parent in parents.items() if parent in tree} - tree:
        tree |= grown
    return tree


def _tree_rss(root: int) -> int:
    """Memory of the render child and its descendants: the driver and the browser's tree.

    Proportional set sizes, so the pages Chromium's processes share are counted once in all.
    """
    total = 0
    for pid in _tree_pids(root):
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
                break
    return total


def _kill_tree(child: subprocess.Popen[bytes]) -> None:
    for pid in _tree_pids(child.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
    child.wait()
    for pipe in (child.stdin, child.stdout):
        if pipe is not None:
            pipe.close()
