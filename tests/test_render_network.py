"""Rendering's browser has no network of its own (docs/rendering.md, "Guarantees"): in its own
network namespace where the platform allows, behind the fail-closed proxy in any case, with
SharedWorker taken away; and the shared render process leaves nothing behind."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fetch import render

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not CHROMIUM.exists() and os.environ.get("CI") != "true",
        reason=f"no Chromium at {CHROMIUM}; apt-get install -y chromium",
    ),
]


class Listener:
    """A TCP listener that only counts the connections it is offered."""

    def __init__(self, address: str, port: int = 0) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((address, port))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.seen: list[bytes] = []
        self.running = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.settimeout(0.5)
            with contextlib.suppress(OSError):
                self.seen.append(conn.recv(300))
            conn.close()

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()


@pytest.fixture
def listeners() -> Iterator[tuple[Listener, Listener]]:
    try:
        proxy = Listener("127.0.0.1", 9)  # where the fail-closed proxy points
    except OSError as exc:
        pytest.skip(f"cannot listen on 127.0.0.1:9 here: {exc}")
    elsewhere = Listener("127.0.0.2")
    yield proxy, elsewhere
    proxy.close()
    elsewhere.close()


def _page(elsewhere: str) -> str:
    return f"""<!doctype html><html><head><title>Escape</title></head><body>
<main><article><h1>Escape</h1><p id="out">The harbour master posts the tide table every Monday.</p>
</article></main>
<script>
const out = document.getElementById("out");
out.textContent += " SharedWorker is " + typeof SharedWorker + ".";
try {{
  const source = "fetch('http://{elsewhere}/shared'); fetch('http://127.0.0.1:9/shared')";
  new SharedWorker("data:text/javascript," + encodeURIComponent(source));
}} catch (e) {{}}
try {{
  const blob = new Blob(["fetch('http://{elsewhere}/worker')"], {{type: "text/javascript"}});
  new Worker(URL.createObjectURL(blob));
}} catch (e) {{}}
fetch("http://{elsewhere}/page").catch(() => {{}});
</script></body></html>"""


@pytest.mark.parametrize("mode", ["namespace", "proxy"])
def test_nothing_the_browser_or_its_page_sends_reaches_the_proxy_port_or_another_address(
    agent, httpserver, settings, listeners, mode
):
    _, client = agent
    if mode == "namespace" and not render.namespace_possible():
        pytest.skip("this platform gives an unprivileged process no network namespace")
    settings.SIFT_FETCH_ALLOW_CIDRS = (ipaddress.ip_network("127.0.0.1/32"),)
    settings.SIFT_RENDER_NAMESPACE = mode == "namespace"
    proxy, elsewhere = listeners
    httpserver.expect_request("/escape").respond_with_data(
        _page(f"127.0.0.2:{elsewhere.port}"), content_type="text/html"
    )
    render.stop_server()  # the next render starts a render process in this mode
    try:
        response = client.get("/v1/fetch", url=httpserver.url_for("/escape"), render="true")
        (pid,) = render.running_pids()
        interfaces = {
            line.split(":")[0].strip() for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
        }
        time.sleep(1.5)  # anything the browser sent late would have arrived by now
    finally:
        render.stop_server()

    assert render.network_mode() == mode
    assert response.status_code == 200, response.content
    assert "SharedWorker is undefined." in response.json()["content"]
    assert (proxy.connections, elsewhere.connections) == (0, 0), (proxy.seen, elsewhere.seen)
    if mode == "namespace":
        assert interfaces == {"lo"}
    else:
        assert len(interfaces) > 1  # the host's own network: the proxy is the only wall
