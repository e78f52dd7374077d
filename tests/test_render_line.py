"""The Procfile's ``render`` line (docs/rendering.md, "The render process"): the machine's render
process kept for the deployment's life, its browser started by a render and closed when idle."""

from __future__ import annotations

import ipaddress
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fetch.render import server_process
from fetch.sandbox import proctree

from .browsers import BROWSER_TESTS, lasting
from .deployment import Deployment, wait_for
from .test_render import ARTICLE_TEXT, SCRIPTED_PAGE, STORY

pytestmark = BROWSER_TESTS
IDLE_SECONDS = 2


@pytest.fixture
def deployment(tmp_path, settings) -> Iterator[Deployment]:
    settings.SIFT_FETCH_ALLOW_CIDRS = (ipaddress.ip_network("127.0.0.1/32"),)
    settings.SIFT_RENDER_TIMEOUT = 10
    server_process.stop_server()
    running = Deployment(tmp_path, {"SIFT_RENDER_IDLE": f"{IDLE_SECONDS}s"})
    try:
        yield running
    finally:
        running.stop_all()
        server_process.stop_server()


def _under(pid: int) -> set[int]:
    return proctree.tree_pids(pid) - {pid}


def _render(client, httpserver, path: str = "/tides"):
    return client.get("/v1/fetch", url=httpserver.url_for(path), render="true", max_age="0")


@pytest.fixture
def pages(httpserver):
    httpserver.expect_request("/tides").respond_with_data(SCRIPTED_PAGE, content_type="text/html")
    httpserver.expect_request("/story.json").respond_with_json(STORY)
    httpserver.expect_request("/spin").respond_with_data(
        "<html><body><p>spin</p><script>while (true) {}</script></body></html>", content_type="text/html"
    )
    return httpserver


def test_the_line_starts_its_browser_for_a_render_closes_it_when_idle_and_runs_on(agent, pages, deployment):
    _, client = agent
    pid = deployment.start_render_line()
    assert _under(pid) == set()  # Python and Playwright loaded; no driver, no browser

    first = _render(client, pages)
    assert first.status_code == 200, first.content
    assert ARTICLE_TEXT in first.json()["content"]
    assert server_process.running_pids() == {pid}  # the line's process rendered it
    assert _under(pid)  # the driver and the browser under it

    mark = Path(f"{deployment.env['SIFT_RENDER_SOCKET']}.browser")
    assert mark.exists()
    wait_for(lambda: not _under(pid), timeout=IDLE_SECONDS + 15, what="the idle browser to close")
    assert proctree.alive(pid)
    assert not mark.exists()

    # A render on its way (its page still downloading) has the browser started meanwhile.
    server_process.start_soon()
    wait_for(mark.exists, what="the browser to start before the render comes")
    assert _under(pid)
    again = _render(client, pages)
    assert again.status_code == 200, again.content
    assert server_process.running_pids() == {pid}

    browser = _under(pid)
    deployment.processes["render"].send_signal(signal.SIGTERM)
    deployment.processes["render"].wait(20)
    wait_for(lambda: not any(proctree.alive(member) for member in browser), what="the browser to end")
    assert not Path(deployment.env["SIFT_RENDER_SOCKET"]).exists()


def test_a_render_past_its_deadline_ends_alone_and_the_lines_browser_lives(
    agent, pages, deployment, settings
):
    _, client = agent
    settings.SIFT_RENDER_TIMEOUT = 3
    pid = deployment.start_render_line()
    assert _render(client, pages).status_code == 200
    browser = lasting(_under(pid))

    spun = _render(client, pages, "/spin")
    assert spun.status_code == 504, spun.content
    assert spun.json()["code"] == "timeout"
    assert proctree.alive(pid)
    assert all(proctree.alive(member) for member in browser)  # its context closed, not the browser

    started = time.monotonic()
    after = _render(client, pages)
    assert after.status_code == 200, after.content
    assert ARTICLE_TEXT in after.json()["content"]
    assert server_process.running_pids() == {pid}
    assert time.monotonic() - started < settings.SIFT_RENDER_TIMEOUT + 15


def test_the_line_replaces_a_render_process_started_on_demand(agent, pages, deployment):
    _, client = agent
    assert _render(client, pages).status_code == 200
    (on_demand,) = server_process.running_pids()
    tree = proctree.tree_pids(on_demand)

    pid = deployment.start_render_line()
    wait_for(lambda: not any(proctree.alive(member) for member in tree), what="the earlier process to end")
    assert _render(client, pages).status_code == 200
    assert server_process.running_pids() == {pid}


def test_a_line_started_beside_a_running_one_takes_its_place_and_none_is_left(agent, pages, deployment):
    _, client = agent
    old = deployment.start_render_line()
    assert _render(client, pages).status_code == 200
    tree = proctree.tree_pids(old)
    # As after a process manager was killed whole: its lines run on, and a new one starts.
    deployment.processes["old render"] = deployment.processes.pop("render")

    new = deployment.start_render_line()
    wait_for(lambda: not any(proctree.alive(member) for member in tree), what="the old line to end")
    assert _render(client, pages).status_code == 200
    assert server_process.running_pids() == {new}


def test_without_a_browser_the_line_waits_and_starts_nothing(deployment):
    deployment.start_procfile("render", SIFT_RENDER_CHROMIUM="/nonexistent/chromium")
    process = deployment.processes["render"]
    comm = Path(f"/proc/{process.pid}/comm")
    wait_for(lambda: comm.read_text().strip() == "sleep", what="the line to wait")
    time.sleep(1)
    assert process.poll() is None  # a process manager would stop every line were this one to end
    assert server_process.listening_pid() is None
