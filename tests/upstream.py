"""Upstreams on loopback for the tests: a threaded page server, and the pages it serves."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# An article with navigation and a footer around it, for extraction to keep only the article.
ARTICLE = """<!doctype html><html lang="en"><head><title>Tides explained</title>
<link rel="canonical" href="https://example.org/tides"></head><body>
<nav><a href="/">Home</a> | <a href="/shop">Shop the sale</a> | <a href="/login">Log in</a></nav>
<article><h1>Tides explained</h1>
<p>Tides are the rise and fall of sea levels caused by the gravity of the Moon and the Sun.</p>
<p>Spring tides happen when the Sun and the Moon line up, giving the largest range of the tide.</p>
<p>Neap tides happen when they pull at right angles, and the range between high and low water is smallest.</p>
</article><footer>Copyright 2026 Sea Facts Ltd. All rights reserved.</footer></body></html>"""


class _PageServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, body: bytes, content_type: str, delay: float) -> None:
        super().__init__(("127.0.0.1", 0), _PageHandler)
        self.body, self.content_type, self.delay = body, content_type, delay


class _PageHandler(BaseHTTPRequestHandler):
    server: _PageServer

    def do_GET(self) -> None:
        time.sleep(self.server.delay)
        self.send_response(200)
        self.send_header("Content-Type", self.server.content_type)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def page_upstream(body: bytes, content_type: str, delay: float = 0) -> Iterator[int]:
    """Serve ``body`` to every GET on 127.0.0.1 after ``delay`` seconds, many at once; yield the port."""
    server = _PageServer(body, content_type, delay)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def slow_upstream(delay: float) -> Iterator[str]:
    """Serve every GET after ``delay`` seconds, many at once; yield the base URL."""
    with page_upstream(b"slow but here", "text/plain", delay) as port:
        yield f"http://127.0.0.1:{port}"
