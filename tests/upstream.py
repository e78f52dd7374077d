"""Upstreams on loopback for the tests, and a resolver that never asks DNS.

``page_upstream`` serves one page over HTTP; ``RawServer`` answers on a bare socket, for
upstreams that break HTTP on purpose. ``numeric_resolve`` and ``resolver_for`` stand in for
``guard.resolve`` so that no host name a test writes or generates reaches a DNS server.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from fetch import guard

REAL_RESOLVE = guard.resolve

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


class RawServer:
    """A TCP server on 127.0.0.1 that logs each request head and answers with ``handler``.

    With ``head=False`` the handler runs at once, without waiting for a request head."""

    def __init__(self, handler: Callable[[socket.socket, RawServer], None], *, head: bool = True) -> None:
        self.handler = handler
        self.wait_for_head = head
        self.requests: list[bytes] = []
        self.stopped = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            head = b""
            while self.wait_for_head and b"\r\n\r\n" not in head:
                data = conn.recv(4096)
                if not data:
                    return
                head += data
            self.requests.append(head)
            with contextlib.suppress(OSError):  # the client hung up, as several tests want
                self.handler(conn, self)

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()


def numeric_resolve(host: str, port: int) -> list[str]:
    """Resolve literal addresses only: ``AI_NUMERICHOST`` parses and never asks DNS."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    return [str(info[4][0]) for info in infos]


def resolver_for(names: dict[str, list[str]]) -> Callable[[str, int], list[str]]:
    """A ``guard.resolve`` that answers ``names`` from the table (read at each call), ``localhost``
    from /etc/hosts, and numeric hosts by parsing them: never DNS."""

    def resolve(host: str, port: int) -> list[str]:
        if host in names:
            return names[host]
        if host == "localhost":
            return REAL_RESOLVE(host, port)  # /etc/hosts, never DNS
        return numeric_resolve(host, port)

    return resolve


# Names under this domain never resolve: ``hanging_resolve`` holds each lookup of one until the
# resolver gives up, as a system resolver does after its timeouts when no server answers.
HANGING_DOMAIN = "hang.test"
HANG_SECONDS = 15.0


def hangs(host: str) -> bool:
    return host == HANGING_DOMAIN or host.endswith(f".{HANGING_DOMAIN}")


def hanging_resolve(host: str, port: int) -> list[str]:
    """A ``guard.resolve`` whose resolver never answers for names under ``hang.test`` (it gives up
    after ``HANG_SECONDS``) and answers the rest as ``resolver_for({})`` does: never DNS. For the
    processes a test starts, name it in ``SIFT_TEST_RESOLVE_FUNC``."""
    if hangs(host):
        time.sleep(HANG_SECONDS)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    return resolver_for({})(host, port)
