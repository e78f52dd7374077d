"""Honest when there is nothing to read: a 2xx HTML page without a word is ``empty`` (422), its hint
names render when the page looks built by scripts; raw, JSON and a narrowing that matches
nothing keep their answers; ``render: "auto"`` reads a page as served when it is not script-built
(docs/api.md). Rendering itself is tested with the browser in tests/test_render_auto.py."""

from __future__ import annotations

import lxml.html
import pytest

from batch.engine.seam import Caller, TargetFailed
from batch.models import BatchTarget
from batch.pipeline_bridge import fetch_target
from fetch.html.reader import looks_script_built
from fetch.targets import parse_target

from .factories import LOOPBACK, failed_target, make_job
from .upstream import ARTICLE

SHELL = b"""<!doctype html><html><head><title>Tide tables</title>
<script type="module" src="/assets/app.js"></script></head>
<body><div id="root"></div></body></html>"""
BARE = b"<!doctype html><html><head><title>Nothing</title></head><body><div class='x'> </div></body></html>"


@pytest.fixture
def open_loopback(settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK


@pytest.mark.parametrize(
    ("markup", "built"),
    [
        (SHELL.decode(), True),
        ("<html><body><app-root></app-root><script src='main.js'></script></body></html>", True),
        (
            "<html><body><p>Loading</p><noscript>Enable JavaScript.</noscript><script>go()</script></body>",
            True,
        ),
        # No script that runs: nothing will fill the element.
        (
            "<html><body><div id='root'></div><script type='application/ld+json'>{}</script></body></html>",
            False,
        ),
        # Text of its own: the page is there as served.
        (ARTICLE, False),
        (BARE.decode(), False),
    ],
)
def test_a_page_looks_script_built_with_little_text_a_script_and_an_empty_element_to_fill(markup, built):
    assert looks_script_built(lxml.html.document_fromstring(markup)) is built


def test_a_script_built_shell_is_422_empty_with_a_hint_to_render_on_get_and_post(
    agent, httpserver, open_loopback
):
    _, client = agent
    httpserver.expect_request("/app").respond_with_data(SHELL, content_type="text/html")
    url = httpserver.url_for("/app")
    for response in (client.get("/v1/fetch", url=url), client.post("/v1/fetch", {"url": url})):
        assert response.status_code == 422, response.content
        body = response.json()
        assert body["code"] == "empty"
        assert "render true" in body["hint"]


def test_a_bare_page_is_empty_with_the_plain_hint_and_raw_mode_still_answers_it(
    agent, httpserver, open_loopback
):
    _, client = agent
    httpserver.expect_request("/bare").respond_with_data(BARE, content_type="text/html")
    url = httpserver.url_for("/bare")
    response = client.get("/v1/fetch", url=url, mode="text")
    assert (response.status_code, response.json()["code"]) == (422, "empty")
    assert "render" not in response.json()["hint"].split(":")[0]
    raw = client.get("/v1/fetch", url=url, mode="raw")
    assert raw.status_code == 200
    assert raw.json()["content"] == BARE.decode()


def test_json_text_and_a_grep_that_matches_nothing_keep_their_answers(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/empty.json").respond_with_data("[]", content_type="application/json")
    httpserver.expect_request("/tides").respond_with_data(ARTICLE, content_type="text/html")
    assert client.get("/v1/fetch", url=httpserver.url_for("/empty.json")).status_code == 200
    jq = client.get("/v1/fetch", url=httpserver.url_for("/empty.json"), jq=".[]")
    assert (jq.status_code, jq.json()["content"]) == (200, "")
    grep = client.get("/v1/fetch", url=httpserver.url_for("/tides"), grep="zebra")
    assert (grep.status_code, grep.json()["content"], grep.json()["matches"]) == (200, "", 0)


def test_render_auto_reads_a_page_with_text_as_served_and_holds_no_render_slot(
    agent, httpserver, open_loopback, settings
):
    _, client = agent
    settings.SIFT_RENDER_SLOTS = 0  # a render would be refused busy: none takes place
    httpserver.expect_request("/tides").respond_with_data(ARTICLE, content_type="text/html")
    httpserver.expect_request("/tides.json").respond_with_data(
        '{"tide": "high"}', content_type="application/json"
    )
    body = client.get("/v1/fetch", url=httpserver.url_for("/tides"), render="auto").json()
    assert "Spring tides" in body["content"]
    assert body["rendered"] is None
    as_json = client.post(
        "/v1/fetch", {"url": httpserver.url_for("/tides.json"), "options": {"render": "auto"}}
    )
    assert as_json.status_code == 200
    assert as_json.json()["rendered"] is None
    # Plain text that names a root element and a script is still plain text: never rendered.
    httpserver.expect_request("/shell.txt").respond_with_data(SHELL, content_type="text/plain")
    as_text = client.get("/v1/fetch", url=httpserver.url_for("/shell.txt"), render="auto")
    assert (as_text.status_code, as_text.json()["rendered"]) == (200, None)


def test_an_empty_batch_target_fails_with_outcome_empty(agent, httpserver, open_loopback):
    caller, _ = agent
    httpserver.expect_request("/app").respond_with_data(SHELL, content_type="text/html")
    with pytest.raises(TargetFailed) as failed:
        fetch_target(Caller(caller.name, caller.caller_class), parse_target(httpserver.url_for("/app")))
    assert failed.value.outcome == "empty"
    assert "render" in failed.value.hint


def test_a_target_row_stores_the_empty_outcome_under_its_constraint(agent):
    caller, _ = agent
    job = make_job(caller, "done", targets=[failed_target(outcome="empty")])
    assert BatchTarget.objects.get(job=job).outcome == "empty"


NAVIGATION_ONLY = b"""<!doctype html><html><head><title>Example</title></head>
<body><header><nav><a href="/">Home</a> <a href="/about">About us</a></nav></header>
<footer><a href="/privacy">Privacy</a></footer></body></html>"""
LINK_LISTING = b"""<!doctype html><html><head><title>Harbour guides</title></head>
<body><nav><a href="/">Home</a></nav><main><ul>
<li><a href="/g/tides">Reading the tide tables</a></li>
<li><a href="/g/moorings">Choosing a mooring</a></li>
<li><a href="/g/charts">Charts for small boats</a></li></ul></main></body></html>"""


def test_a_page_of_navigation_alone_is_empty_and_a_listing_of_links_is_content(
    agent, httpserver, open_loopback
):
    _, client = agent
    httpserver.expect_request("/nav").respond_with_data(NAVIGATION_ONLY, content_type="text/html")
    httpserver.expect_request("/guides").respond_with_data(LINK_LISTING, content_type="text/html")
    for mode in ("text", "markdown"):
        response = client.get("/v1/fetch", url=httpserver.url_for("/nav"), mode=mode)
        assert (response.status_code, response.json()["code"]) == (422, "empty")
        listing = client.get("/v1/fetch", url=httpserver.url_for("/guides"), mode=mode)
        assert listing.status_code == 200, listing.content
        assert "Choosing a mooring" in listing.json()["content"]
        assert "Home" not in listing.json()["content"]
