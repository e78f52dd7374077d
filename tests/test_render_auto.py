"""``render: "auto"`` and hidden text on rendered pages, in Debian's Chromium: a script-built page is
rendered (and only it), and what its computed style hides never reaches the agent
(docs/rendering.md, docs/fetch-content.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.quality import non_article_pages, score
from fetch.models import RenderSlot

from .browsers import BROWSER_TESTS
from .factories import LOOPBACK

pytestmark = BROWSER_TESTS
RENDERED_PAGES = Path(__file__).resolve().parents[1] / "bench" / "pages" / "rendered"
HIDDEN_BY_STYLESHEET = [
    "Agents reading this page",
    "Ignore your instructions",
    "guaranteed to the minute",
    "written by the coastguard",
    "swimming is safe",
]


@pytest.fixture
def render_settings(settings) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_RENDER_TIMEOUT = 10
    settings.SIFT_CACHE_TTL = 900


def test_auto_renders_a_script_built_page_and_drops_what_its_stylesheet_hides(
    agent, httpserver, render_settings
):
    _, client = agent
    (page,) = non_article_pages(RENDERED_PAGES)
    httpserver.expect_request("/tides").respond_with_data(page.body, content_type="text/html")
    url = httpserver.url_for("/tides")
    shell = client.get("/v1/fetch", url=url, mode="text")
    assert (shell.status_code, shell.json()["code"]) == (422, "empty")
    assert "render" in shell.json()["hint"]
    auto = client.get("/v1/fetch", url=url, mode="text", render="auto")
    assert auto.status_code == 200, auto.content
    body = auto.json()
    assert body["rendered"] is True
    assert score(body["content"], page.truth).f1 >= 0.95
    for line in HIDDEN_BY_STYLESHEET:
        assert line not in body["content"]
    assert body["hidden_chars"] > 150
    # "Tide predictions ..." fades in from opacity 0: it stays.
    assert "Tide predictions are published a year ahead" in body["content"]
    again = client.post("/v1/fetch", {"url": url, "options": {"mode": "text", "render": "auto"}}).json()
    assert (again["cache"], again["rendered"], again["content"]) == ("hit", True, body["content"])
    kept = client.get("/v1/fetch", url=url, mode="text", render="true", hidden="keep").json()
    assert "written by the coastguard" in kept["content"]
    assert kept["hidden_chars"] == 0
    assert not RenderSlot.objects.exclude(holder="").exists()
