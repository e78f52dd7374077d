"""Consent answered and overlays removed on rendered pages (docs/rendering.md, "As a person sees
it"), on pages imitating the common consent platforms (``consent_pages``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pytest

from batch import checks
from fetch.render import autoconsent, server_process

from . import consent_pages as pages
from .browsers import BROWSER_TESTS

pytestmark = BROWSER_TESTS
ONLY_127_0_0_1 = (ipaddress.ip_network("127.0.0.1/32"),)


@pytest.fixture(autouse=True, scope="module")
def render_process_stopped_after_the_module() -> Iterator[None]:
    yield
    server_process.stop_server()


@pytest.fixture
def render_settings(settings) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = ONLY_127_0_0_1
    settings.SIFT_RENDER_TIMEOUT = 15
    settings.SIFT_CACHE_TTL = 900


def _rendered(client, httpserver, html: str, path: str = "/story", **options):
    httpserver.expect_request(path).respond_with_data(html, content_type="text/html")
    body = {"url": httpserver.url_for(path), "options": {"render": True, "mode": "text", **options}}
    return client.post("/v1/fetch", body)


def _read_as_a_person(answer: dict) -> None:
    for sentence in pages.ARTICLE:
        assert sentence in answer["content"]
    assert pages.BANNER not in answer["content"]


@pytest.mark.parametrize("platform", sorted(pages.PLATFORMS))
def test_each_platforms_banner_is_rejected_by_default_and_left_out_of_the_text(
    agent, httpserver, render_settings, platform
):
    _, client = agent
    response = _rendered(client, httpserver, pages.PLATFORMS[platform])

    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["consent_handled"] == "rejected"
    assert "Choice: reject" in answer["content"]
    _read_as_a_person(answer)


@pytest.mark.parametrize("platform", sorted(pages.PLATFORMS))
def test_consent_accept_clicks_each_platforms_accept(agent, httpserver, render_settings, platform):
    _, client = agent
    response = _rendered(client, httpserver, pages.PLATFORMS[platform], consent="accept")

    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["consent_handled"] == "accepted"
    assert "Choice: accept" in answer["content"]
    _read_as_a_person(answer)


def test_a_banner_that_offers_no_reject_is_removed_and_never_accepted(agent, httpserver, render_settings):
    _, client = agent
    answer = _rendered(client, httpserver, pages.ONETRUST_NO_REJECT).json()

    assert answer["consent_handled"] == "removed"
    assert "Choice:" not in answer["content"]
    _read_as_a_person(answer)


def test_a_wall_of_no_known_platform_is_removed_and_the_article_under_it_read(
    agent, httpserver, render_settings
):
    _, client = agent
    answer = _rendered(client, httpserver, pages.GENERIC_WALL).json()

    assert answer["consent_handled"] == "removed"
    assert pages.GENERIC_WALL_TEXT not in answer["content"]
    assert "Choice:" not in answer["content"]
    _read_as_a_person(answer)


def test_a_newsletter_modal_and_its_backdrop_are_removed_and_no_consent_is_claimed(
    agent, httpserver, render_settings
):
    _, client = agent
    answer = _rendered(client, httpserver, pages.NEWSLETTER).json()

    assert answer["consent_handled"] is None
    assert pages.NEWSLETTER_TEXT not in answer["content"]
    _read_as_a_person(answer)


def test_consent_leave_leaves_the_banner_and_the_overlays_in_the_page(agent, httpserver, render_settings):
    """Read raw (the rendered DOM), where the extraction of the main content cannot hide them: the
    banner's text is in the page's script once, and in the DOM once more while it is there."""
    _, client = agent
    banner = _rendered(client, httpserver, pages.ONETRUST, consent="leave", mode="raw").json()
    wall = _rendered(client, httpserver, pages.GENERIC_WALL, path="/wall", consent="leave", mode="raw").json()
    rejected = _rendered(client, httpserver, pages.ONETRUST, path="/again", mode="raw").json()
    removed = _rendered(client, httpserver, pages.GENERIC_WALL, path="/wall-again", mode="raw").json()

    assert (banner["consent_handled"], wall["consent_handled"]) == (None, None)
    assert banner["content"].count(pages.BANNER) == 2
    assert "<p>Choice:" not in banner["content"]
    assert "sift-consent" not in banner["content"]
    assert wall["content"].count(pages.GENERIC_WALL_TEXT) == 2
    assert rejected["content"].count(pages.BANNER) == 1
    assert removed["content"].count(pages.GENERIC_WALL_TEXT) == 1


def test_rendered_copies_are_kept_apart_by_consent_and_a_hit_says_what_was_done(
    agent, httpserver, render_settings
):
    _, client = agent
    rejected = _rendered(client, httpserver, pages.DIDOMI).json()
    again = _rendered(client, httpserver, pages.DIDOMI).json()
    accepted = _rendered(client, httpserver, pages.DIDOMI, consent="accept").json()
    accepted_again = _rendered(client, httpserver, pages.DIDOMI, consent="accept").json()

    assert (rejected["cache"], again["cache"]) == ("miss", "hit")
    assert again["consent_handled"] == "rejected"
    assert "Choice: reject" in again["content"]
    assert accepted["cache"] == "miss"
    assert "Choice: accept" in accepted["content"]
    assert (accepted_again["cache"], accepted_again["consent_handled"]) == ("hit", "accepted")


def test_consent_other_than_the_default_needs_a_render(agent) -> None:
    _, client = agent
    response = client.post("/v1/fetch", {"url": "https://example.org/", "options": {"consent": "accept"}})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert "render" in response.json()["hint"]


def test_a_check_warns_when_the_consent_rules_are_not_installed(monkeypatch, tmp_path) -> None:
    assert checks.consent_rules_installed() == []  # make installed them for this suite
    monkeypatch.setattr(autoconsent, "PACKAGE", tmp_path)
    monkeypatch.setattr(autoconsent, "LIBRARY", tmp_path / "missing.js")

    warned = checks.consent_rules_installed()

    assert [message.id for message in warned] == ["sift.W012"]
    assert "npm" in (warned[0].hint or "")


APP_SHELL = """<!doctype html><html lang="en"><head><title>Tides</title></head><body>
<div id="root"></div>
<script>
window.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("root");
  root.innerHTML = "<main><article id='story'><h1>Tides</h1>" + %s.map((t) => "<p>" + t + "</p>").join("")
    + "</article></main>";
  const banner = document.createElement("div");
  banner.id = "onetrust-consent-sdk";
  banner.innerHTML = "<div id='onetrust-banner-sdk' style='position:fixed;bottom:0'><p>%s</p>"
    + "<button id='onetrust-reject-all-handler'>Reject All</button></div>";
  document.body.appendChild(banner);
  document.getElementById("onetrust-reject-all-handler").addEventListener("click", () => {
    const note = document.createElement("p"); note.textContent = "Choice: reject";
    document.getElementById("story").appendChild(note); banner.remove(); });
});
</script></body></html>"""


def test_render_auto_answers_consent_when_it_renders(agent, httpserver, render_settings):
    _, client = agent
    html = APP_SHELL % (list(pages.ARTICLE), pages.BANNER)
    httpserver.expect_request("/app").respond_with_data(html, content_type="text/html")
    body = {"url": httpserver.url_for("/app"), "options": {"render": "auto", "mode": "text"}}

    answer = client.post("/v1/fetch", body).json()

    assert answer["rendered"] is True
    assert answer["consent_handled"] == "rejected"
    assert "Choice: reject" in answer["content"]
    _read_as_a_person(answer)
