"""Rendering (docs/rendering.md): a page's scripts run in headless Chromium, every request of the
page fetched by sift's guarded client.

The browser runs in a child process (``render_child.py``) started with an empty environment in
a session of its own, so Playwright's driver and Chromium never see sift's secrets, and the whole
tree can be killed at once. This side answers the child's requests with ``client.download``,
enforces the render's deadline and watches the tree's resident memory.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from batch.fetch import client
from batch.fetch.errors import FetchError
from batch.fetch.models import RenderSlot
from batch.fetch.outcomes import Outcome, RetryAfter

CHILD = Path(__file__).with_name("render_child.py")
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
SLOT_WAIT_SECONDS = 5.0
POLL_SECONDS = 0.25
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
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


@contextmanager
def render_slot() -> Iterator[int]:
    """One of ``RENDER_SLOTS`` places a browser may render in, deployment-wide, like the fetch gate."""
    token = secrets.token_hex(16)
    deadline = time.monotonic() + SLOT_WAIT_SECONDS
    while (number := _try_take(token)) is None:
        if time.monotonic() >= deadline:
            raise FetchError(
                Outcome.BUSY,
                f"all {settings.SIFT_RENDER_SLOTS} render slots stayed busy for {SLOT_WAIT_SECONDS:.0f}s",
                f"sift is rendering as much as it may; retry after {RetryAfter.PARSER} seconds.",
                retry_after=RetryAfter.PARSER,
            )
        time.sleep(0.05)
    try:
        yield number
    finally:
        RenderSlot.objects.filter(number=number, holder=token).update(holder="", lease_until=None)


def _try_take(token: str) -> int | None:
    now = timezone.now()
    count = settings.SIFT_RENDER_SLOTS
    lease = timedelta(seconds=settings.SIFT_FETCH_TIMEOUT + settings.SIFT_RENDER_TIMEOUT + 5)
    with transaction.atomic():
        free = (
            RenderSlot.objects.select_for_update(skip_locked=True)
            .filter(number__lt=count)
            .filter(Q(holder="") | Q(lease_until__lt=now))
            .order_by("number")
        )
        slot = free.first()
        if slot is None and RenderSlot.objects.count() < count:
            RenderSlot.objects.bulk_create(
                [RenderSlot(number=n) for n in range(count)], ignore_conflicts=True
            )
            slot = free.first()
        if slot is None:
            return None
        RenderSlot.objects.filter(number=slot.number).update(holder=token, lease_until=now + lease)
    return slot.number


def render(document: client.Download) -> str:
    """The DOM of ``document`` after its scripts ran; ``RenderCrashed`` if the browser died."""
    deadline = time.monotonic() + float(settings.SIFT_RENDER_TIMEOUT)
    child = subprocess.Popen(
        [sys.executable, "-I", str(CHILD)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin"},
        start_new_session=True,
        cwd="/",
    )
    running.add(child.pid)
    try:
        assert child.stdin is not None and child.stdout is not None
        _send(
            child.stdin,
            {
                "chromium": settings.SIFT_RENDER_CHROMIUM,
                "url": document.final_url,
                "content_type": document.content_type,
                "body": base64.b64encode(document.body).decode("ascii"),
                "timeout_ms": int(float(settings.SIFT_RENDER_TIMEOUT) * 1000),
            },
        )
        return _converse(child, deadline)
    finally:
        running.discard(child.pid)
        _kill_tree(child)


def _converse(child: subprocess.Popen[bytes], deadline: float) -> str:
    assert child.stdin is not None and child.stdout is not None
    while True:
        message = _next_message(child, deadline)
        if "html" in message:
            return str(message["html"])
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
            raise FetchError(
                Outcome.FILTER_TIMEOUT,
                "the page's scripts used more memory than a render may",
                "Fetch the page without render.",
            )
        ready, _, _ = select.select([child.stdout], [], [], min(POLL_SECONDS, remaining))
        if ready:
            line = child.stdout.readline()
            if not line:
                raise RenderCrashed("the browser process ended without an answer")
            message: dict[str, Any] = json.loads(line)
            return message


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


def _session_pids(session: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getsid(int(entry)) == session:
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def _tree_rss(session: int) -> int:
    """Resident bytes of every process of the render child's session: the browser's whole tree."""
    total = 0
    for pid in _session_pids(session):
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE_SIZE
        except (OSError, IndexError, ValueError):
            continue
    return total


def _kill_tree(child: subprocess.Popen[bytes]) -> None:
    for pid in _session_pids(child.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
    child.wait()
    for pipe in (child.stdin, child.stdout):
        if pipe is not None:
            pipe.close()
