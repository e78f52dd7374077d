"""With ``SIFT_RENDER_SLOTS`` above 1, a render past its deadline ends alone: its context is
closed, and the browser's other render goes on (docs/rendering.md, "Guarantees").

The other render's page waits for a script that its site answers only once the first render has
ended, so it is mid-render when the first is given up; were the browser killed, it would be
rendered again, and its site would be asked for that script twice.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection

from fetch.render import server_process

from .browsers import BROWSER_TESTS
from .deployment import wait_for

pytestmark = BROWSER_TESTS
TEXT = "Neap tides come a week after the spring tides, when the Sun and the Moon pull at right angles."
PAGES = {
    "/warm": b"<html><body><main><p>" + TEXT.encode() + b"</p></main></body></html>",
    "/spin": b"<html><body><p>spin</p><script>while (true) {}</script></body></html>",
    "/patient": b'<html><body><main><h1>Tides</h1><script src="/late.js"></script></main></body></html>',
}
LATE_SCRIPT = f'document.querySelector("main").insertAdjacentHTML("beforeend", "<p>{TEXT}</p>");'.encode()


class Site:
    """Serves ``PAGES``, and ``/late.js`` only once ``release`` is set; counts every path."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.asked: Counter[str] = Counter()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.asked[self.path] += 1
                if self.path == "/late.js":
                    site.release.wait(60)
                    body, kind = LATE_SCRIPT, "text/javascript"
                else:
                    body, kind = PAGES.get(self.path, b""), "text/html"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True, scope="module")
def render_process_stopped_after_the_module() -> Iterator[None]:
    yield
    server_process.stop_server()


@pytest.fixture
def site() -> Iterator[Site]:
    served = Site()
    yield served
    served.close()


def test_a_render_past_its_deadline_ends_alone_and_the_other_render_in_the_browser_completes(
    make_caller, settings, site
):
    settings.SIFT_FETCH_ALLOW_CIDRS = (ipaddress.ip_network("127.0.0.1/32"),)
    settings.SIFT_RENDER_SLOTS = 2
    settings.SIFT_RENDER_TIMEOUT = 10
    _, spinner = make_caller("spinner")
    _, patient = make_caller("patient")
    # The browser up first, so that both renders' deadlines start as their pages arrive.
    assert spinner.get("/v1/fetch", url=site.url("/warm"), render="true").status_code == 200
    answers = {}

    def spin() -> None:
        try:
            answers["spin"] = spinner.get("/v1/fetch", url=site.url("/spin"), render="true")
        finally:
            site.release.set()  # the other page's script comes once this render has ended
            connection.close()

    spinning = threading.Thread(target=spin)
    spinning.start()
    wait_for(lambda: site.asked["/spin"] == 1, what="the endless page's download")
    time.sleep(5)  # halfway through its deadline: the other render begins beside it
    began = time.monotonic()
    rendered = patient.get("/v1/fetch", url=site.url("/patient"), render="true")
    took = time.monotonic() - began
    spinning.join()

    assert answers["spin"].status_code == 504, answers["spin"].content
    assert answers["spin"].json()["code"] == "timeout"
    assert rendered.status_code == 200, rendered.content
    assert TEXT in rendered.json()["content"]
    assert site.asked["/late.js"] == 1  # rendered once: the browser lived through the other's end
    assert took < 10 + 5  # within its own deadline (and the fetch around it)
