"""A render process started on demand (no Procfile ``render`` line) ends with the deployment that
used it: once its starter and every process that rendered with it have ended, not an idle period
later (docs/rendering.md, "The render process")."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from fetch.render import server_process
from fetch.sandbox import proctree

from .browsers import BROWSER_TESTS
from .deployment import Deployment, wait_for
from .test_render import ARTICLE_TEXT, SCRIPTED_PAGE, STORY

pytestmark = BROWSER_TESTS
# Far longer than any wait below: a process that ends has ended for its users, not for idleness.
ENV = {"SIFT_RENDER_IDLE": "10m", "SIFT_FETCH_ALLOW_CIDRS": "127.0.0.1/32", "SIFT_RENDER_TIMEOUT": "10s"}


@pytest.fixture
def deployments(tmp_path) -> Iterator[list[Deployment]]:
    server_process.stop_server()
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    running = [Deployment(tmp_path / name, ENV) for name in ("first", "second")]
    try:
        yield running
    finally:
        for deployment in running:
            deployment.stop_all()
        server_process.stop_server()


def _render(deployment: Deployment, key: str, url: str) -> None:
    status, body, _ = deployment.request(f"/v1/fetch?url={quote(url, safe='')}&render=true&max_age=0", key)
    assert status == 200, body
    assert ARTICLE_TEXT.encode() in body


def test_a_render_process_started_on_demand_lives_while_a_web_process_using_it_runs_and_ends_with_the_last(
    agent, httpserver, deployments
):
    _, caller = agent
    httpserver.expect_request("/tides").respond_with_data(SCRIPTED_PAGE, content_type="text/html")
    httpserver.expect_request("/story.json").respond_with_json(STORY)
    page = httpserver.url_for("/tides")
    first, second = deployments
    first.start_procfile_web()
    second.start_procfile_web()

    _render(first, caller.raw_key, page)  # starts the render process on demand
    pid = server_process.listening_pid()  # a probe: this test process is not one it serves
    assert pid is not None
    tree = proctree.tree_pids(pid)  # with its driver and browser
    _render(second, caller.raw_key, page)
    assert server_process.listening_pid() == pid  # shared

    first.stop("web")
    time.sleep(3)  # the render process looks at the processes it serves every second
    assert server_process.listening_pid() == pid
    _render(second, caller.raw_key, page)

    second.stop("web")
    wait_for(lambda: not any(proctree.alive(member) for member in tree), what="the render process to end")
    assert server_process.listening_pid() is None
