"""Webhook receivers on loopback for the tests: one records every POST and answers as scripted,
one never answers and counts the requests it holds open at once."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    at: float  # time.monotonic() when the request arrived
    path: str
    headers: dict[str, str]
    body: bytes
    wall: float = field(default_factory=time.time)  # the same moment, to compare with stored times


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
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/hooks/sift"

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
def receiver(script: tuple[int, ...] = (), then: int = 200, host: str = "127.0.0.1") -> Iterator[Receiver]:
    """A receiver on ``host`` answering ``script`` then ``then``; stopped on the way out."""
    server = Receiver(list(script), then, host)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class Silent:
    """Accepts every connection, reads the request and never answers: each attempt waits out its
    deadline. Counts the requests open at once, from their first bytes until the sender hangs up."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.open = 0
        self.most_open = 0
        self.seen = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/hooks/sift"

    def serve(self) -> None:
        while not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                conn, _ = self.sock.accept()
                threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(0.2)
            if not self._read(conn):
                return
            with self.lock:
                self.open += 1
                self.seen += 1
                self.most_open = max(self.most_open, self.open)
            try:
                while self._read(conn):
                    pass
            finally:
                with self.lock:
                    self.open -= 1

    def _read(self, conn: socket.socket) -> bool:
        """Whether the sender is still there: wait for bytes or its hang-up, until stopped."""
        while not self.stopping.is_set():
            try:
                return bool(conn.recv(65536))
            except TimeoutError:
                continue
            except OSError:
                return False
        return False


@contextmanager
def silent_receiver() -> Iterator[Silent]:
    """A receiver on 127.0.0.1 that never answers; stopped on the way out."""
    server = Silent()
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        thread.join()
        server.sock.close()
