"""Rendering's browser has no network of its own (docs/rendering.md, "Guarantees"): in its own
network namespace where the platform allows, behind the fail-closed proxy in any case, with
SharedWorker taken away; and the shared render process leaves nothing behind."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.checks import run_checks

from fetch.render import server_process
from fetch.sandbox import proctree

from .browsers import BROWSER_TESTS, Listener
from .deployment import Deployment

pytestmark = BROWSER_TESTS


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
    if mode == "namespace" and not server_process.namespace_possible():
        pytest.skip("this platform gives an unprivileged process no network namespace")
    settings.SIFT_FETCH_ALLOW_CIDRS = (ipaddress.ip_network("127.0.0.1/32"),)
    settings.SIFT_RENDER_NAMESPACE = mode == "namespace"
    proxy, elsewhere = listeners
    httpserver.expect_request("/escape").respond_with_data(
        _page(f"127.0.0.2:{elsewhere.port}"), content_type="text/html"
    )
    server_process.stop_server()  # the next render starts a render process in this mode
    try:
        response = client.get("/v1/fetch", url=httpserver.url_for("/escape"), render="true")
        (pid,) = server_process.running_pids()
        interfaces = {
            line.split(":")[0].strip() for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
        }
        time.sleep(1.5)  # anything the browser sent late would have arrived by now
    finally:
        server_process.stop_server()

    assert server_process.network_mode() == mode
    (shown,) = [m for m in run_checks() if m.id == "sift.I001"]
    assert ("namespace of its own" in shown.msg) is (mode == "namespace")
    assert f"({settings.SIFT_RENDER_CHROMIUM})" in shown.msg  # which browser renders
    assert response.status_code == 200, response.content
    assert "SharedWorker is undefined." in response.json()["content"]
    assert (proxy.connections, elsewhere.connections) == (0, 0), (proxy.seen, elsewhere.seen)
    if mode == "namespace":
        assert interfaces == {"lo"}
    else:
        assert len(interfaces) > 1  # the host's own network: the proxy is the only wall


SCRIPTED = (
    '<!doctype html><html><body><main><article id="a"><h1>Tides</h1></article></main><script>'
    'const p = document.createElement("p"); p.textContent = "Written by the page script about tides.";'
    ' document.getElementById("a").appendChild(p);</script></body></html>'
)
SPIN = "<html><body><p>spin</p><script>while (true) {}</script></body></html>"


def _render_family() -> set[int]:
    """The render process's tree, and in the namespace mode every process of its namespace
    (Chromium's crash handler leaves the tree for init)."""
    family: set[int] = set()
    for pid in server_process.running_pids():
        family |= proctree.tree_pids(pid)
        try:
            namespace = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            continue
        if namespace != os.readlink("/proc/self/ns/net"):
            for entry in Path("/proc").iterdir():
                with contextlib.suppress(OSError):
                    if entry.name.isdigit() and os.readlink(entry / "ns" / "net") == namespace:
                        family.add(int(entry.name))
    return family


def _settled_tree(timeout: float = 10) -> tuple[int, int]:
    """The render process's tree, how many processes and their PSS, once its process count has held
    for half a second: a tab closes and the next spare is made shortly after each answer."""
    counts: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (len(counts) < 5 or len(set(counts[-5:])) > 1):
        time.sleep(0.1)
        (pid,) = server_process.running_pids()
        counts.append(len(proctree.tree_pids(pid)))
    (pid,) = server_process.running_pids()
    return counts[-1], proctree.tree_pss(pid)


@pytest.mark.parametrize("line", [False, True], ids=["on-demand", "render-line"])
def test_timeouts_and_crashes_leave_no_process_and_no_memory_behind(
    agent, httpserver, settings, tmp_path, line
):
    """The short version of ``bench/render.py --soak`` (a heap hog's own test is in test_render.py),
    with a render process started on demand and with the Procfile's render line."""
    _, client = agent
    settings.SIFT_FETCH_ALLOW_CIDRS = (ipaddress.ip_network("127.0.0.1/32"),)
    settings.SIFT_RENDER_TIMEOUT = 15
    for path, body in (("/page", SCRIPTED), ("/spin", SPIN)):
        httpserver.expect_request(path).respond_with_data(body, content_type="text/html")
    seen: set[int] = set()

    def rendered(path: str, n: int) -> int:
        settings.SIFT_RENDER_TIMEOUT = 3 if path == "/spin" else 15
        response = client.get("/v1/fetch", url=httpserver.url_for(path) + f"?n={n}", render="true")
        seen.update(_render_family())
        return response.status_code

    server_process.stop_server()
    deployment = Deployment(tmp_path, {})
    if line:
        deployment.start_render_line()
    try:
        assert rendered("/page", 0) == 200
        first = _settled_tree()  # its tab closed and the spare context made after it
        outcomes = [rendered("/spin", 1), rendered("/page", 2)]
        for pid in server_process.running_pids():
            for member in proctree.tree_pids(pid):
                with contextlib.suppress(OSError):  # a closed tab's renderer may end meanwhile
                    if "chromium" in Path(f"/proc/{member}/comm").read_text():
                        os.kill(member, 9)
        time.sleep(0.5)  # the render process sees its browser gone (test_render.py kills one mid-render)
        outcomes += [rendered("/page", 4), rendered("/page", 5), rendered("/page", 6)]
        last = _settled_tree()
    finally:
        server_process.stop_server()
        deployment.stop_all()
    time.sleep(1)
    left = {pid for pid in seen if proctree.alive(pid)}

    assert outcomes == [504, 200, 200, 200, 200]
    assert last[0] == first[0]
    assert last[1] < first[1] * 1.5
    assert left == set()
