"""The subrequest part of ``bench/render.py`` (``--subrequests``): what real pages ask of a render's
bounds (docs/rendering.md, "Subrequests").

1. Per page of the twelve scripted pages and the first ``--pages`` of the article set, served on
   127.0.0.1: the subrequests the render had fetched (those the guard refused included: a page's
   requests to other sites) and the bytes of their bodies; the median, 90th percentile and most.
2. The render time of the scripted pages with every subrequest answered after ``DELAY`` (a
   stand-in for a round trip), by ``SIFT_RENDER_PER_HOST`` (2, 3, 4), interleaved.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

from bench import harness, render_pages, stats

DELAY = 0.1
PER_HOST = (2, 3, 4)
DELAYED_PAGES = ("/subresources", "/fetch-json", "/xhr-chain", "/module")


@contextmanager
def _serving(files: dict[str, tuple[str, bytes]], pages: set[str], delay: float) -> Iterator[int]:
    """``files`` on 127.0.0.1; every path but ``pages`` answered ``delay`` late."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            kind, body = files.get(path, ("text/plain", b"not here"))
            if path not in pages:
                time.sleep(delay)
            self.send_response(200 if path in files else 404)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((harness.LOOPBACK, 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def _counted() -> Iterator[list[int]]:
    """Every subrequest download of this process, its body's size (0 when refused), in a list."""
    from fetch import client
    from fetch.render import subrequests

    sizes: list[int] = []
    real: Callable[..., Any] = client.download

    def download(url: str, **kwargs: Any) -> Any:
        try:
            answer = real(url, **kwargs)
        except Exception:
            sizes.append(0)
            raise
        sizes.append(len(answer.body))
        return answer

    subrequests.client = SimpleNamespace(download=download, Download=client.Download)  # type: ignore[assignment]
    try:
        yield sizes
    finally:
        subrequests.client = client


def _render(port: int, path: str) -> dict[str, Any] | None:
    from fetch.errors import FetchError
    from fetch.pipeline import fetch
    from fetch.targets import Target, TargetOptions

    target = Target(f"http://{harness.LOOPBACK}:{port}{path}", TargetOptions(render=True, max_age=0))
    try:
        return fetch(target, partition="bench", caller="bench")
    except FetchError:
        return None


def run(articles: dict[str, bytes]) -> None:
    files, markers = render_pages.build()
    files.update({path: ("text/html; charset=utf-8", body) for path, body in articles.items()})
    pages = set(markers) | set(articles)
    counts: list[int] = []
    sizes: list[int] = []
    with _serving(files, pages, 0.0) as port, _counted() as seen:
        for path in [*markers, *articles]:
            seen.clear()
            _render(port, path)
            counts.append(len(seen))
            sizes.append(sum(seen))
    print(f"{len(counts)} pages rendered ({len(markers)} scripted, {len(articles)} articles)")
    for what, values in (("subrequests", counts), ("bytes", sizes)):
        print(
            f"  {what:<12} median {stats.median(values):>9.0f}  p90 {stats.percentile(values, 90):>9.0f}"
            f"  most {max(values):>9}"
        )
    _per_host(files, markers)


def _per_host(files: dict[str, tuple[str, bytes]], markers: dict[str, str], rounds: int = 5) -> None:
    from django.conf import settings

    seconds: dict[tuple[str, int], list[float]] = {(p, n): [] for p in DELAYED_PAGES for n in PER_HOST}
    right = dict.fromkeys(PER_HOST, 0)
    with _serving(files, set(markers), DELAY) as port:
        _render(port, "/inline")  # the browser up first
        for turn in range(rounds):
            for path in DELAYED_PAGES:
                for share in PER_HOST if turn % 2 == 0 else reversed(PER_HOST):
                    settings.SIFT_RENDER_PER_HOST = share
                    began = time.monotonic()
                    answer = _render(port, path)
                    seconds[(path, share)].append(time.monotonic() - began)
                    right[share] += bool(answer and markers[path] in answer["content"])
                    time.sleep(0.3)
    print(f"render time by SIFT_RENDER_PER_HOST, each subrequest answered {DELAY * 1000:.0f} ms late:")
    for path in DELAYED_PAGES:
        cells = "  ".join(f"{n}: {stats.median(seconds[(path, n)]):.2f}s" for n in PER_HOST)
        print(f"  {path:<14} {cells}")
    print(f"  read right: {right} of {rounds * len(DELAYED_PAGES)} each")
