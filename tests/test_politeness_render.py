"""Politeness and ``render: true``: the page a render loads obeys robots.txt and takes its host's
turn; the page's own subrequests do not (docs/politeness.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from fetch.render import server_process

from .browsers import BROWSER_TESTS
from .factories import LOOPBACK
from .sites import Answer, site

pytestmark = BROWSER_TESTS
STORY_TEXT = "Neap tides come a week after the spring tides, when the Sun and the Moon pull at right angles."
SCRIPTED_PAGE = b"""<!doctype html><html lang="en"><head><title>Tides</title></head><body>
<main><article id="story"><h1>Tides</h1><p>Loading...</p></article></main>
<script>
fetch("/story.json").then(r => r.json()).then(story => {
  const p = document.createElement("p"); p.textContent = story.text;
  document.getElementById("story").appendChild(p);
});
</script></body></html>"""


@pytest.fixture(autouse=True, scope="module")
def render_process_stopped_after_the_module() -> Iterator[None]:
    yield
    server_process.stop_server()


ROUTES = {
    "/tides": Answer(body=SCRIPTED_PAGE),
    "/story.json": Answer(body=json.dumps({"text": STORY_TEXT}).encode(), content_type="application/json"),
    "/robots.txt": Answer(body=b"User-agent: sift\nDisallow: /private\n", content_type="text/plain"),
    "/other": Answer(),
}


@pytest.fixture
def render_settings(settings) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_RENDER_TIMEOUT = 10
    settings.SIFT_CACHE_TTL = 900


def test_a_render_takes_one_turn_and_its_subrequests_none(agent, render_settings, settings):
    _, client = agent
    settings.SIFT_FETCH_HOST_INTERVAL = 60.0
    with site(routes=ROUTES) as upstream:
        rendered = client.post("/v1/fetch", {"url": upstream.url("/tides"), "options": {"render": True}})
        after = client.get("/v1/fetch", url=upstream.url("/other"))
        story_reads = upstream.count("/story.json")
    assert rendered.status_code == 200, rendered.content
    assert STORY_TEXT in rendered.json()["content"]  # the script's request went out within the turn
    assert story_reads == 1
    assert after.status_code == 429, after.content  # the page's own request took the host's turn
    assert after.json()["code"] == "busy"


def test_a_render_obeys_robots_txt_for_the_page_it_loads(agent, render_settings):
    _, client = agent
    with site(routes={**ROUTES, "/private": Answer(body=SCRIPTED_PAGE)}) as upstream:
        allowed = client.post(
            "/v1/fetch", {"url": upstream.url("/tides"), "options": {"render": True, "robots": True}}
        )
        refused = client.post(
            "/v1/fetch", {"url": upstream.url("/private"), "options": {"render": True, "robots": True}}
        )
        private_reads = upstream.count("/private")
    assert allowed.status_code == 200, allowed.content
    assert STORY_TEXT in allowed.json()["content"]
    assert refused.status_code == 403, refused.content
    assert "robots.txt" in refused.json()["hint"]
    assert private_reads == 0
