"""``render: true``: a page's scripts run in Debian's Chromium, and every request of the page goes
through sift's guard (docs/rendering.md)."""

from __future__ import annotations

import ipaddress
import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from werkzeug import Request, Response

from batch import jobs
from batch.models import BatchJob
from doors.mcp.tools import TOOLS
from doors.validation import validate_targets
from fetch.render import renderer, server_process
from fetch.sandbox import proctree
from fetch.targets import TargetOptions, parse_target

from .browsers import BROWSER_TESTS, Listener, lasting
from .deployment import Deployment, wait_for

pytestmark = BROWSER_TESTS
ONLY_127_0_0_1 = (ipaddress.ip_network("127.0.0.1/32"),)
ARTICLE_TEXT = (
    "Neap tides come a week after the spring tides, when the Sun and the Moon pull at right angles."
)
SCRIPTED_PAGE = """<!doctype html><html lang="en"><head><title>Tides</title></head><body>
<main><article id="story"><h1>Tides</h1><p>Loading…</p></article></main>
<script>
fetch("/story.json").then(r => r.json()).then(story => {
  const article = document.getElementById("story");
  for (const text of story.paragraphs) {
    const p = document.createElement("p"); p.textContent = text; article.appendChild(p);
  }
});
</script></body></html>"""
STORY = {"paragraphs": [ARTICLE_TEXT, "Their range is the smallest of the month, and harbours plan by it."]}


@pytest.fixture(autouse=True, scope="module")
def render_process_stopped_after_the_module() -> Iterator[None]:
    yield
    server_process.stop_server()


@pytest.fixture
def render_settings(settings) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = ONLY_127_0_0_1
    settings.SIFT_RENDER_TIMEOUT = 10
    settings.SIFT_CACHE_TTL = 900


def _fetch(client, **params):
    return client.get("/v1/fetch", **params)


def test_text_written_by_a_script_appears_with_render_and_not_without(agent, httpserver, render_settings):
    _, client = agent
    httpserver.expect_request("/tides").respond_with_data(SCRIPTED_PAGE, content_type="text/html")
    httpserver.expect_request("/story.json").respond_with_json(STORY)
    url = httpserver.url_for("/tides")

    plain = _fetch(client, url=url)
    rendered = _fetch(client, url=url, render="true")

    assert plain.status_code == 200, plain.content
    assert ARTICLE_TEXT not in plain.json()["content"]
    assert not plain.json().get("rendered")
    assert rendered.status_code == 200, rendered.content
    assert ARTICLE_TEXT in rendered.json()["content"]
    assert rendered.json()["rendered"] is True


@pytest.fixture
def blocked_server() -> Iterator[Listener]:
    recorder = Listener("127.0.0.2")
    yield recorder
    recorder.close()


def test_requests_to_a_blocked_address_never_reach_it_and_the_render_succeeds(
    agent, httpserver, render_settings, blocked_server
):
    _, client = agent
    elsewhere = f"127.0.0.2:{blocked_server.port}"
    page = f"""<!doctype html><html><head><title>Probe</title>
<link rel="stylesheet" href="http://{elsewhere}/style.css"></head><body>
<main><article><h1>Probe</h1>
<p id="out">The harbour master posts the tide table every Monday.</p></article></main>
<iframe src="http://{elsewhere}/frame"></iframe>
<img src="http://{elsewhere}/pixel.png">
<script src="http://{elsewhere}/script.js"></script>
<script>
fetch("http://{elsewhere}/exfiltrate").catch(() => {{}});
navigator.sendBeacon && navigator.sendBeacon("http://{elsewhere}/beacon", "x");
try {{ new WebSocket("ws://{elsewhere}/socket"); }} catch (e) {{}}
const ice = {{iceServers: [{{urls: "stun:{elsewhere}"}}]}};
const pc = window.RTCPeerConnection ? new RTCPeerConnection(ice) : null;
if (pc) {{ pc.createDataChannel("x"); pc.createOffer().then(o => pc.setLocalDescription(o)); }}
window.open("http://{elsewhere}/popup");
document.getElementById("out").textContent += " Rendered by its script.";
</script></body></html>"""
    httpserver.expect_request("/probe").respond_with_data(page, content_type="text/html")

    response = _fetch(client, url=httpserver.url_for("/probe"), render="true")
    time.sleep(1)  # anything the browser sent late would have arrived by now

    assert response.status_code == 200, response.content
    assert "Rendered by its script." in response.json()["content"]
    assert blocked_server.connections == 0


def test_an_endless_script_times_out_within_the_render_timeout_and_the_next_render_works(
    agent, httpserver, render_settings, settings
):
    _, client = agent
    settings.SIFT_RENDER_TIMEOUT = 4
    httpserver.expect_request("/spin").respond_with_data(
        "<html><body><p>spin</p><script>while (true) {}</script></body></html>", content_type="text/html"
    )
    httpserver.expect_request("/tides").respond_with_data(SCRIPTED_PAGE, content_type="text/html")
    httpserver.expect_request("/story.json").respond_with_json(STORY)

    renders, restarts = counted("sift_render_renders_total", outcome="timeout"), restarted("timeout")
    started = time.monotonic()
    spun = _fetch(client, url=httpserver.url_for("/spin"), render="true")
    took = time.monotonic() - started
    after = _fetch(client, url=httpserver.url_for("/tides"), render="true")

    assert counted("sift_render_renders_total", outcome="timeout") == renders + 1
    # Given up alone (its context closed), the browser kept for the next render: no restart.
    assert restarted("timeout") == restarts
    assert spun.status_code == 504, spun.content
    assert spun.json()["code"] == "timeout"
    assert took < 4 + 2 + 3  # the render timeout, its 2 s margin, and the plain fetch before it
    assert after.status_code == 200, after.content
    assert ARTICLE_TEXT in after.json()["content"]


HOG = (
    "<html><body><script>const a = [];"
    " while (true) { a.push(new Array(1e6).fill(Math.random())); }</script></body></html>"
)


def test_a_page_that_outgrows_its_script_heap_ends_memory_limit_and_the_next_render_works(
    agent, httpserver, render_settings, settings
):
    _, client = agent
    settings.SIFT_RENDER_TIMEOUT = 30
    httpserver.expect_request("/hog").respond_with_data(HOG, content_type="text/html")
    httpserver.expect_request("/tides").respond_with_data(SCRIPTED_PAGE, content_type="text/html")
    httpserver.expect_request("/story.json").respond_with_json(STORY)

    response = _fetch(client, url=httpserver.url_for("/hog"), render="true")
    after = _fetch(client, url=httpserver.url_for("/tides"), render="true")

    assert response.status_code == 422, response.content
    assert response.json()["code"] == "memory_limit"
    assert response.json()["error"].startswith("the page's tab crashed")
    assert response.json()["hint"] == renderer.MEMORY_HINT
    assert after.status_code == 200, after.content
    assert ARTICLE_TEXT in after.json()["content"]


def test_a_browser_over_the_render_memory_limit_is_killed_and_the_render_ends_memory_limit(
    agent, httpserver, render_settings, settings
):
    _, client = agent
    settings.SIFT_RENDER_MAX_MEMORY = 32 << 20  # less than any browser holds
    httpserver.expect_request("/tides").respond_with_data(SCRIPTED_PAGE, content_type="text/html")
    httpserver.expect_request("/story.json").respond_with_json(STORY)
    memory_kills = restarted("memory")

    response = _fetch(client, url=httpserver.url_for("/tides"), render="true")
    children = set(server_process.running_pids())

    assert restarted("memory") == memory_kills + 1  # the memory kills the alert counts
    assert response.status_code == 422, response.content
    assert response.json()["code"] == "memory_limit"
    assert response.json()["error"].startswith("the browser held more memory than a render may")
    assert children == set()  # the child and its tree were killed


def counted(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def restarted(reason: str) -> float:
    return counted("sift_render_browser_restarts_total", reason=reason)


def _browser_pids() -> list[int]:
    """Chromium processes started by this process's render children."""
    pids = []
    for child in list(server_process.running_pids()):
        for pid in proctree.tree_pids(child):
            try:
                if "chromium" in Path(f"/proc/{pid}/comm").read_text():
                    pids.append(pid)
            except OSError:
                continue
    return pids


def test_a_browser_killed_mid_render_is_retried_and_the_next_render_succeeds(
    agent, httpserver, render_settings
):
    _, client = agent
    killed: list[int] = []

    def story(request: Request) -> Response:
        if not killed:
            killed.extend(_browser_pids())
            for pid in killed:
                os.kill(pid, 9)
        return Response(json.dumps(STORY), content_type="application/json")

    httpserver.expect_request("/tides").respond_with_data(SCRIPTED_PAGE, content_type="text/html")
    httpserver.expect_request("/story.json").respond_with_handler(story)

    first = _fetch(client, url=httpserver.url_for("/tides"), render="true")

    assert killed, "the test found no browser to kill"
    assert first.status_code == 200, first.content
    assert ARTICLE_TEXT in first.json()["content"]


class CountingUpstream(ThreadingHTTPServer):
    """Serves the scripted page; its story answers slowly and counts how many are asked at once.

    A story is asked only by a browser rendering the page, so that count is the renders at once.
    """

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CountingHandler)
        self.lock = threading.Lock()
        self.inflight = 0
        self.most = 0
        self.stories = 0


class _CountingHandler(BaseHTTPRequestHandler):
    server: CountingUpstream

    def do_GET(self) -> None:
        if self.path.startswith("/story.json"):
            with self.server.lock:
                self.server.inflight += 1
                self.server.stories += 1
                self.server.most = max(self.server.most, self.server.inflight)
            time.sleep(1.5)
            with self.server.lock:
                self.server.inflight -= 1
            body, content_type = json.dumps(STORY).encode(), "application/json"
        else:
            body, content_type = SCRIPTED_PAGE.encode(), "text/html"
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.cluster
def test_a_batch_of_six_renders_on_two_workers_never_renders_more_than_render_slots_at_once(tmp_path, agent):
    caller, _ = agent
    upstream = CountingUpstream()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = upstream.server_address[1]
    deployment = Deployment(
        tmp_path,
        {
            "SIFT_TEST_FETCH_FUNC": "",  # the fetch pipeline, as in production
            "SIFT_BATCH_WORKERS": "2",
            "SIFT_RENDER_SLOTS": "1",
            "SIFT_FETCH_ALLOW_CIDRS": "127.0.0.1/32",
            "SIFT_BATCH_RETRY_WAIT": "0.5s",
        },
    )
    deployment.start_cluster()
    try:
        targets: list[object] = [
            {"url": f"http://127.0.0.1:{port}/tides?n={n}", "options": {"render": True}} for n in range(6)
        ]
        job = jobs.submit(caller, validate_targets(targets)).job
        wait_for(lambda: not BatchJob.objects.get(pk=job.pk).is_live, timeout=180, what="the job to finish")
    finally:
        deployment.stop_all()
        upstream.shutdown()
        upstream.server_close()
    job.refresh_from_db()
    assert (job.status, job.targets_done) == ("done", 6), deployment.log("cluster")[-3000:]
    assert all(ARTICLE_TEXT in target.result["content"] for target in job.targets.all()), [
        t.result for t in job.targets.all()
    ]
    assert all(target.result["meta"]["rendered"] for target in job.targets.all())
    assert upstream.stories >= 6
    assert upstream.most == 1


def test_render_is_an_option_of_every_mode_and_its_default_leaves_the_canonical_form_unchanged() -> None:
    for mode in ("markdown", "text", "raw"):
        options = {"mode": mode, "grep": "tide", "question": "when?", "render": True}
        target = parse_target({"url": "https://example.org/a", "options": options})
        assert target.options.render is True
        assert target.to_dict()["options"]["render"] is True
    plain = parse_target({"url": "https://example.org/a", "options": {"render": False}})
    assert plain.to_dict() == {"url": "https://example.org/a", "options": {}}
    assert TargetOptions().to_dict() == {}


def test_render_must_be_a_boolean(agent) -> None:
    _, client = agent
    response = client.post("/v1/fetch", {"url": "https://example.org/a", "options": {"render": "yes"}})
    assert response.status_code == 400, response.content
    assert response.json()["details"][0]["field"] == "options.render"


def test_render_is_in_the_openapi_schema_and_the_mcp_fetch_tool(client) -> None:
    document = client.get("/v1/openapi.json").json()
    assert "render" in json.dumps(document["components"]["schemas"])
    assert any(p["name"] == "render" for p in document["paths"]["/v1/fetch"]["get"]["parameters"])
    render_schema = TOOLS["fetch"].input_schema["properties"]["render"]
    assert render_schema["anyOf"] == [{"type": "boolean"}, {"type": "string", "enum": ["auto"]}]


def test_without_chromium_a_render_answers_415_unsupported_and_a_plain_fetch_still_works(
    agent, httpserver, render_settings, settings, tmp_path
):
    _, client = agent
    settings.SIFT_RENDER_CHROMIUM = str(tmp_path / "no-chromium")
    httpserver.expect_request("/tides").respond_with_data(SCRIPTED_PAGE, content_type="text/html")

    refused = _fetch(client, url=httpserver.url_for("/tides"), render="true")
    plain = _fetch(client, url=httpserver.url_for("/tides"))

    assert refused.status_code == 415, refused.content
    assert refused.json()["code"] == "unsupported"
    assert "rendering is not available here" in refused.json()["error"]
    assert refused.json()["hint"]
    assert plain.status_code == 200


def test_rendered_copies_are_cached_apart_from_raw_ones(agent, httpserver, render_settings):
    _, client = agent
    httpserver.expect_request("/tides").respond_with_data(SCRIPTED_PAGE, content_type="text/html")
    httpserver.expect_request("/story.json").respond_with_json(STORY)
    url = httpserver.url_for("/tides")

    plain = _fetch(client, url=url)
    rendered = _fetch(client, url=url, render="true")
    rendered_again = _fetch(client, url=url, render="true")
    plain_again = _fetch(client, url=url)

    assert (plain.json()["cached"], rendered.json()["cached"]) == (False, False)
    assert (rendered_again.json()["cached"], rendered_again.json()["rendered"]) == (True, True)
    assert ARTICLE_TEXT in rendered_again.json()["content"]
    assert plain_again.json()["cached"] is True
    assert ARTICLE_TEXT not in plain_again.json()["content"]


def test_max_age_0_renders_again_and_a_rendered_copy_says_where_it_came_from(
    agent, httpserver, render_settings
):
    _, client = agent
    httpserver.expect_request("/tides").respond_with_data(SCRIPTED_PAGE, content_type="text/html")
    httpserver.expect_request("/story.json").respond_with_json(STORY)
    url = httpserver.url_for("/tides")

    answers = [
        _fetch(client, url=url, render="true").json(),
        _fetch(client, url=url, render="true").json(),
        _fetch(client, url=url, render="true", max_age=0).json(),
    ]

    assert [(a["cache"], a["rendered"]) for a in answers] == [("miss", True), ("hit", True), ("miss", True)]
    assert all(ARTICLE_TEXT in a["content"] for a in answers)
    assert len([entry for entry in httpserver.log if entry[0].path == "/tides"]) == 2


def test_the_browser_stays_warm_between_renders_and_after_a_render_given_up_at_its_deadline(
    agent, httpserver, render_settings, settings
):
    _, client = agent
    settings.SIFT_RENDER_TIMEOUT = 4
    for path in ("/a", "/b", "/c"):
        httpserver.expect_request(path).respond_with_data(SCRIPTED_PAGE, content_type="text/html")
    httpserver.expect_request("/story.json").respond_with_json(STORY)
    httpserver.expect_request("/spin").respond_with_data(
        "<html><body><script>while (true) {}</script></body></html>", content_type="text/html"
    )

    first = _fetch(client, url=httpserver.url_for("/a"), render="true")
    children_first = set(server_process.running_pids())
    second = _fetch(client, url=httpserver.url_for("/b"), render="true")
    children_second = set(server_process.running_pids())
    browser = lasting(set(_browser_pids()))
    spun = _fetch(client, url=httpserver.url_for("/spin"), render="true")
    third = _fetch(client, url=httpserver.url_for("/c"), render="true")

    assert [r.status_code for r in (first, second, spun, third)] == [200, 200, 504, 200]
    assert len(children_first) == 1
    assert children_second == children_first
    # The endless page's render was given up alone: its context closed, the browser kept.
    assert set(server_process.running_pids()) == children_first
    assert browser
    assert browser <= set(_browser_pids())
