"""A render's subrequests are bounded in count, bytes and per-host concurrency, and the envelope
says when a render was cut (docs/rendering.md, "Subrequests").

The GETs are counted where they land: at a site on loopback.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fetch.models import CachedDocument
from fetch.render import server_process

from .browsers import BROWSER_TESTS

pytestmark = BROWSER_TESTS
TEXT = "Neap tides come a week after the spring tides, when the Sun and the Moon pull at right angles."
AMPLIFIER = f"""<!doctype html><html><head><title>Many requests</title></head><body>
<main><h1>Tides</h1><p>{TEXT}</p></main>
<script>
for (let i = 0; i < 10; i++) window.open("/sub/open/" + i);
for (let i = 0; i < 40; i++) {{
  const frame = document.createElement("iframe"); frame.src = "/sub/frame/" + i;
  document.body.appendChild(frame);
}}
for (let i = 0; i < 60; i++) fetch("/sub/fetch/" + i).catch(() => null);
</script></body></html>"""
ONE_AT_A_TIME = f"""<!doctype html><html><head><title>Large bodies</title></head><body>
<main><h1>Tides</h1><p>{TEXT}</p></main>
<script>
(async () => {{
  for (let i = 0; i < 10; i++) {{
    try {{ await (await fetch("/sub/large/" + i)).text(); }} catch (e) {{ break; }}
  }}
}})();
</script></body></html>"""
AT_ONCE = f"""<!doctype html><html><head><title>At once</title></head><body>
<main><h1>Tides</h1><p>{TEXT}</p></main>
<script>for (let i = 0; i < 12; i++) fetch("/sub/slow/" + i).catch(() => null);</script>
</body></html>"""
LARGE = b"x" * 100_000


@dataclass
class Upstream:
    """A site that counts the GETs of ``/sub/...`` and the most of them in flight at once."""

    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    gets: int = 0
    in_flight: int = 0
    most_in_flight: int = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@contextmanager
def upstream() -> Iterator[Upstream]:
    served = Upstream()
    pages = {"/amplifier": AMPLIFIER, "/one-at-a-time": ONE_AT_A_TIME, "/at-once": AT_ONCE}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body, kind = pages.get(self.path, "").encode(), "text/html"
            if self.path.startswith("/sub/"):
                with served.lock:
                    served.gets += 1
                    served.in_flight += 1
                    served.most_in_flight = max(served.most_in_flight, served.in_flight)
                try:
                    if self.path.startswith("/sub/slow/"):
                        time.sleep(0.3)
                    body = LARGE if self.path.startswith("/sub/large/") else b"<p>a frame</p>"
                    kind = "text/plain" if self.path.startswith("/sub/large/") else "text/html"
                finally:
                    with served.lock:
                        served.in_flight -= 1
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    served.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True, scope="module")
def render_process_stopped_after_the_module() -> Iterator[None]:
    yield
    server_process.stop_server()


@pytest.fixture
def render_settings(settings) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = (ipaddress.ip_network("127.0.0.1/32"),)
    settings.SIFT_RENDER_TIMEOUT = 20
    settings.SIFT_CACHE_TTL = 900


def test_a_page_asking_110_subrequests_gets_the_bound_and_the_envelope_says_it_was_cut(
    agent, render_settings, settings
):
    _, client = agent
    settings.SIFT_RENDER_SUBREQUESTS = 30
    with upstream() as site:
        answer = client.get("/v1/fetch", url=site.url("/amplifier"), render="true")
        gets = site.gets
    assert answer.status_code == 200, answer.content
    envelope = answer.json()
    assert TEXT in envelope["content"]
    assert 0 < gets <= 30
    assert envelope["render_cut"]["reasons"] == ["subrequests"]
    assert envelope["render_cut"]["refused"] >= 1
    assert not CachedDocument.objects.filter(partition__startswith="rendered|").exists()


def test_a_render_stops_downloading_once_its_bytes_are_spent(agent, render_settings, settings):
    _, client = agent
    settings.SIFT_RENDER_SUBREQUEST_BYTES = 250_000  # two and a half of the page's 100 KB bodies
    with upstream() as site:
        answer = client.get("/v1/fetch", url=site.url("/one-at-a-time"), render="true")
        gets = site.gets
    assert answer.status_code == 200, answer.content
    assert gets == 3  # the third began with 50 KB left, and was cut off; none began after it
    assert answer.json()["render_cut"] == {"reasons": ["bytes"], "refused": 1}


def test_at_most_the_per_host_share_of_a_renders_subrequests_reach_one_host_at_once(
    agent, render_settings, settings
):
    _, client = agent
    settings.SIFT_RENDER_PER_HOST = 2
    with upstream() as site:
        answer = client.get("/v1/fetch", url=site.url("/at-once"), render="true")
        gets, most = site.gets, site.most_in_flight
    assert answer.status_code == 200, answer.content
    assert gets == 12
    assert most <= 2
    assert answer.json().get("render_cut") is None
