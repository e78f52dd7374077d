"""A site on a loopback address of the test's choosing that records when each request arrived.

The politeness tests need two hosts (``127.0.0.1`` and ``127.0.0.3`` are two hosts to sift) and
the arrival time of every request at the site, robots.txt included.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGE = b"<html><head><title>A page</title></head><body><p>Waves come and go on the beach.</p></body></html>"


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = PAGE
    content_type: str = "text/html"
    delay: float = 0.0


@dataclass
class Site:
    """Answers ``routes[path]`` (a 404 for any other path) and logs ``(path, monotonic time)``."""

    address: str
    routes: dict[str, Answer] = field(default_factory=dict)
    arrivals: list[tuple[str, float]] = field(default_factory=list)
    port: int = 0

    def url(self, path: str) -> str:
        return f"http://{self.address}:{self.port}{path}"

    def times(self, path: str | None = None) -> list[float]:
        """Arrival times of every request (or of ``path``'s), in order."""
        return sorted(t for p, t in list(self.arrivals) if path is None or p == path)

    def count(self, path: str) -> int:
        return len(self.times(path))

    def pages(self) -> list[float]:
        """Arrival times of every request but robots.txt."""
        return sorted(t for p, t in list(self.arrivals) if p != "/robots.txt")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    site: Site


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        site = self.server.site
        site.arrivals.append((self.path, time.monotonic()))
        answer = site.routes.get(self.path, Answer(404, b"not here", "text/plain"))
        time.sleep(answer.delay)
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def site(address: str = "127.0.0.1", routes: dict[str, Answer] | None = None) -> Iterator[Site]:
    """Serve ``routes`` on ``address`` (any 127.0.0.0/8 address) at a free port, many at once."""
    server = _Server((address, 0), _Handler)
    served = Site(address, dict(routes or {}), port=server.server_address[1])
    server.site = served
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
