"""A threaded upstream on loopback for tests that need slow or concurrent answers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _SlowHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(self.server.delay)  # type: ignore[attr-defined]
        body = b"slow but here"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def slow_upstream(delay: float) -> Iterator[str]:
    """Serve every GET after ``delay`` seconds, many at once; yield the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowHandler)
    server.delay = delay  # type: ignore[attr-defined]
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
