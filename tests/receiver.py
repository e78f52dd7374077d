"""A webhook receiver on loopback for the tests: records every POST, answers as scripted."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    at: float  # time.monotonic() when the request arrived
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver(ThreadingHTTPServer):
    """Answers the statuses of ``script`` in turn, then ``then`` for every later POST."""

    daemon_threads = True

    def __init__(self, script: list[int], then: int, host: str = "127.0.0.1") -> None:
        super().__init__((host, 0), _Handler)
        self.script = list(script)
        self.then = then
        self.received: list[Received] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hooks/sift"

    def next_status(self, request: Received) -> int:
        with self.lock:
            self.received.append(request)
            return self.script.pop(0) if self.script else self.then

    def posts(self) -> list[Received]:
        with self.lock:
            return list(self.received)


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        request = Received(time.monotonic(), self.path, dict(self.headers.items()), body)
        status = self.server.next_status(request)
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def receiver(script: tuple[int, ...] = (), then: int = 200) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1 answering ``script`` then ``then``; stopped on the way out."""
    server = Receiver(list(script), then)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
