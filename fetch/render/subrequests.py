"""A render's subrequests, bounded (docs/rendering.md, "Subrequests"): a page is a request
amplifier, so what one render may ask of the network is counted here, in the fetching process.

Every request of the page that the browser hands over (scripts, styles, frames, ``fetch()``, XHR,
popups) is one subrequest, fetched by the guarded client within what is left of the render's
deadline. Per render:

- at most ``SIFT_RENDER_SUBREQUESTS`` are fetched; the next ones are refused in the browser;
- their bodies together hold at most ``SIFT_RENDER_SUBREQUEST_BYTES``: each download may read
  what is left of that when it begins, no more, and none begins once it is spent;
- at most ``PARALLEL`` are in flight at once, and at most ``SIFT_RENDER_PER_HOST`` to one host
  (its canonical name); the others wait in their host's queue, in the order the page asked, while
  requests to other hosts go on.

A request refused by a bound is refused in the browser as a guard refusal is, and the render
says so (``cut``): the envelope's ``render_cut`` (docs/api.md).
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from fetch import client
from fetch.errors import FetchError
from fetch.outcomes import Outcome
from fetch.wire.hostnames import canonical_host

# Subrequests of one render fetched at once, each through the guard.
PARALLEL = 4
# Why a render was cut, as the envelope names it.
COUNT, BYTES = "subrequests", "bytes"

Send = Callable[[dict[str, Any], bytes], None]


class Subrequests:
    """One render's subrequests: admitted within its bounds, fetched on a few threads, each
    answer handed to ``send``; ``left()`` is the seconds left of the render's deadline."""

    def __init__(self, send: Send, left: Callable[[], float]) -> None:
        self.send, self.left = send, left
        self.most = int(settings.SIFT_RENDER_SUBREQUESTS)
        self.bytes_left = int(settings.SIFT_RENDER_SUBREQUEST_BYTES)
        self.per_host = int(settings.SIFT_RENDER_PER_HOST)
        self.asked = 0
        self.refused: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.queues: dict[str, deque[dict[str, Any]]] = {}
        self.active: Counter[str] = Counter()
        self.closed = False
        self.pool = ThreadPoolExecutor(PARALLEL, thread_name_prefix="render-fetch")

    def warm(self) -> None:
        """Start a first thread now, so its start does not land in a subrequest's wait."""
        self.pool.submit(_nothing)

    def submit(self, request: dict[str, Any]) -> None:
        """Admit one request of the page (``{"fetch": url, "id": n}``), or refuse it at once."""
        host = _host(str(request["fetch"]))
        with self.lock:
            if self.asked >= self.most:
                self.refused[COUNT] += 1
                refuse = True
            else:
                self.asked += 1
                refuse = False
                self.queues.setdefault(host, deque()).append(request)
                start = self.active[host] < self.per_host
                if start:
                    self.active[host] += 1
        if refuse:
            self._refuse(request, Outcome.BLOCKED)
        elif start:
            with suppress(RuntimeError):  # the pool is shut: the render ended
                self.pool.submit(self._drain, host)

    def cut(self) -> dict[str, Any] | None:
        """What the bounds refused, None if nothing: the reasons and the requests refused."""
        with self.lock:
            if not self.refused:
                return None
            return {"reasons": sorted(self.refused), "refused": sum(self.refused.values())}

    def close(self) -> None:
        """The render ended: no queued request is fetched any more."""
        with self.lock:
            self.closed = True
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _drain(self, host: str) -> None:
        """Fetch ``host``'s queue, one request at a time on this thread, until it is empty."""
        while True:
            with self.lock:
                queue = self.queues.get(host)
                if not queue or self.closed:
                    self.queues.pop(host, None)
                    self.active[host] -= 1
                    return
                request = queue.popleft()
            self._answer(request)

    def _answer(self, request: dict[str, Any]) -> None:
        """The guarded client's answer to one request, within the deadline and the bytes left."""
        left = min(float(settings.SIFT_FETCH_TIMEOUT), self.left())
        with self.lock:
            allowed = min(int(settings.SIFT_FETCH_MAX_BYTES), self.bytes_left)
            spent = allowed <= 0
            if spent:
                self.refused[BYTES] += 1
        if spent:
            self._refuse(request, Outcome.TOO_LONG)
            return
        try:
            if left <= 0:
                raise FetchError(Outcome.TIMEOUT, "past the render's deadline", "")
            download = client.download(str(request["fetch"]), timeout=left, max_bytes=allowed)
        except FetchError as exc:
            if exc.outcome == Outcome.TOO_LONG and allowed < int(settings.SIFT_FETCH_MAX_BYTES):
                with self.lock:
                    self.refused[BYTES] += 1
                    self.bytes_left = 0  # what was left did not hold this one: none begins now
            self._refuse(request, exc.outcome)
            return
        with self.lock:
            self.bytes_left -= len(download.body)
        answer = {"id": request["id"], "status": download.status, "content_type": content_type(download)}
        self.send(answer, download.body)

    def _refuse(self, request: dict[str, Any], outcome: str) -> None:
        self.send({"id": request["id"], "refused": outcome}, b"")


def content_type(download: client.Download) -> str:
    """The declared type with its charset, so the browser decodes the bytes as the site meant."""
    media = download.content_type or "application/octet-stream"
    return f"{media}; charset={download.charset}" if download.charset else media


def _host(url: str) -> str:
    try:
        return canonical_host(urlsplit(url).hostname or "")
    except ValueError:
        return ""


def _nothing() -> None:
    pass
