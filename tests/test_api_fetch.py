"""/v1/fetch end to end through the API, against pages served on loopback.

What it answers: docs/api.md; how it fetches: docs/fetch-pipeline.md.
"""

from __future__ import annotations

import json

import pytest
from werkzeug import Response

from fetch.models import CachedDocument

from .factories import LOOPBACK
from .fixtures.pdf_writer import build_pdf
from .upstream import ARTICLE, slow_upstream


@pytest.fixture
def open_loopback(settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_CACHE_TTL = 900


def _fetch(client, **params):
    return client.get("/v1/fetch", **params)


def test_an_html_article_comes_back_as_markdown_with_its_meta(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/tides").respond_with_data(ARTICLE, content_type="text/html; charset=utf-8")
    response = _fetch(client, url=httpserver.url_for("/tides"))
    assert response.status_code == 200, response.content
    body = response.json()
    assert "Spring tides happen when the Sun and the Moon line up" in body["content"]
    assert "Shop the sale" not in body["content"]
    assert (body["title"], body["lang"], body["status"], body["mode"]) == (
        "Tides explained",
        "en",
        200,
        "markdown",
    )
    assert body["canonical_url"] == "https://example.org/tides"
    assert body["chars"] == len(body["content"])
    assert (body["cached"], body["stale"]) == (False, False)
    assert body["content_type"] == "text/html"


def test_post_takes_one_target_with_options(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/tides").respond_with_data(ARTICLE, content_type="text/html")
    response = client.post(
        "/v1/fetch", {"url": httpserver.url_for("/tides"), "options": {"grep": "Neap", "mode": "text"}}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["matches"] == 1
    assert "Neap tides happen" in body["content"]
    assert "Spring" not in body["content"]


def test_pdf_pages_are_selected(agent, httpserver, open_loopback):
    _, client = agent
    pdf = build_pdf([[f"This is page {n}."] for n in range(1, 6)])
    httpserver.expect_request("/doc.pdf").respond_with_data(pdf, content_type="application/pdf")
    body = _fetch(client, url=httpserver.url_for("/doc.pdf"), pages="2-3").json()
    assert (body["pages_total"], body["pages"]) == (5, [2, 3])
    assert "This is page 2." in body["content"]
    assert "This is page 3." in body["content"]
    assert "page 1." not in body["content"]
    assert "page 4." not in body["content"]
    past_end = _fetch(client, url=httpserver.url_for("/doc.pdf"), pages="7")
    assert past_end.status_code == 400
    assert past_end.json()["code"] == "invalid_request"
    assert "5" in past_end.json()["hint"]


def test_json_with_jq_returns_the_filtered_value(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/data").respond_with_json({"items": [{"name": "alpha"}, {"name": "beta"}]})
    body = _fetch(client, url=httpserver.url_for("/data"), jq=".items[1].name").json()
    assert json.loads(body["content"]) == "beta"


def test_an_upstream_404_is_502_upstream_4xx_with_the_status(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/gone").respond_with_data("no", status=404)
    response = _fetch(client, url=httpserver.url_for("/gone"))
    assert response.status_code == 502
    assert response.json()["code"] == "upstream_4xx"
    assert response.json()["upstream_status"] == 404


def test_an_upstream_429_is_busy_with_its_retry_after(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/slow").respond_with_data("later", status=429, headers={"Retry-After": "7"})
    response = _fetch(client, url=httpserver.url_for("/slow"))
    assert response.status_code == 429
    assert (response.json()["code"], response["Retry-After"], response.json()["retry_after"]) == (
        "busy",
        "7",
        7,
    )


def test_an_image_is_415_unsupported(agent, httpserver, open_loopback):
    _, client = agent
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    httpserver.expect_request("/cat.png").respond_with_data(png, content_type="image/png")
    response = _fetch(client, url=httpserver.url_for("/cat.png"))
    assert (response.status_code, response.json()["code"]) == (415, "unsupported")


def test_text_over_the_default_limit_is_answered_in_a_first_slice_with_a_cursor(
    agent, httpserver, open_loopback, settings
):
    settings.SIFT_FETCH_MAX_CHARS = 1000
    _, client = agent
    httpserver.expect_request("/big.txt").respond_with_data("word " * 1000, content_type="text/plain")
    response = _fetch(client, url=httpserver.url_for("/big.txt"))
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["chars"], body["total_chars"]) == (1000, 5000)
    assert body["content"] == "word " * 200
    assert body["next_cursor"]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/",
        "http://[::1]:8080/",
        "http://10.1.2.3/",
        "http://169.254.169.254/latest/meta-data/",
    ],
)
def test_private_addresses_are_403_blocked_without_a_request(agent, httpserver, url):
    _, client = agent
    response = _fetch(client, url=url)
    assert (response.status_code, response.json()["code"]) == (403, "blocked")
    assert "169.254" not in response.json()["error"] + response.json()["hint"]
    assert httpserver.log == []


def test_the_local_server_is_blocked_when_loopback_is_not_allowed(agent, httpserver, settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = ()
    _, client = agent
    httpserver.expect_request("/").respond_with_data("secret")
    response = _fetch(client, url=httpserver.url_for("/"))
    assert response.status_code == 403
    assert httpserver.log == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"url": "file:///etc/passwd"}, "url"),
        ({"url": "https://u:p@example.org/"}, "url"),
        ({"url": "https://example.org/", "mode": "pdf"}, "options.mode"),
        ({"url": "https://example.org/", "jq": ".["}, "options.jq"),
        ({"url": "https://example.org/", "grpe": "x"}, None),
    ],
)
def test_invalid_requests_are_400_naming_the_field(agent, params, field):
    _, client = agent
    response = _fetch(client, **params)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    if field:
        assert response.json()["details"][0]["field"] == field


def test_fetch_needs_a_key(db, client):
    assert client.get("/v1/fetch", {"url": "https://example.org/"}).status_code == 401


def test_a_second_fetch_within_the_ttl_comes_from_the_cache(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/tides").respond_with_data(ARTICLE, content_type="text/html")
    first = _fetch(client, url=httpserver.url_for("/tides")).json()
    second = _fetch(client, url=httpserver.url_for("/tides"), mode="text").json()
    assert len(httpserver.log) == 1
    assert (first["cached"], second["cached"]) == (False, True)
    assert "Spring tides" in second["content"]


def test_a_restricted_caller_never_sees_a_fleet_callers_copy(make_caller, httpserver, open_loopback):
    _, fleet = make_caller("fleet-agent")
    _, restricted = make_caller("private-agent", caller_class="restricted")
    httpserver.expect_request("/tides").respond_with_data(ARTICLE, content_type="text/html")
    _fetch(fleet, url=httpserver.url_for("/tides"))
    body = _fetch(restricted, url=httpserver.url_for("/tides")).json()
    assert body["cached"] is False
    assert len(httpserver.log) == 2
    assert set(CachedDocument.objects.values_list("partition", flat=True)) == {
        "fleet",
        "restricted:private-agent",
    }


def test_a_stale_copy_is_revalidated_and_a_304_refreshes_it(agent, httpserver, open_loopback, settings):
    settings.SIFT_CACHE_TTL = 0
    _, client = agent
    seen = []

    def handler(request):
        seen.append(request.headers.get("If-None-Match"))
        if request.headers.get("If-None-Match") == '"v1"':
            return Response(status=304)
        return Response(ARTICLE, content_type="text/html", headers={"ETag": '"v1"'})

    httpserver.expect_request("/tides").respond_with_handler(handler)
    assert _fetch(client, url=httpserver.url_for("/tides")).json()["cached"] is False
    again = _fetch(client, url=httpserver.url_for("/tides")).json()
    assert seen == [None, '"v1"']
    assert again["cached"] is True
    assert "Spring tides" in again["content"]


def test_a_304_with_new_validators_makes_the_next_revalidation_send_them(
    agent, httpserver, open_loopback, settings
):
    settings.SIFT_CACHE_TTL = 0
    _, client = agent
    seen = []

    def handler(request):
        seen.append(request.headers.get("If-None-Match"))
        if request.headers.get("If-None-Match") in ('"v1"', '"v2"'):
            return Response(status=304, headers={"ETag": '"v2"'})
        return Response(ARTICLE, content_type="text/html", headers={"ETag": '"v1"'})

    httpserver.expect_request("/tides").respond_with_handler(handler)
    for _ in range(3):
        assert "Spring tides" in _fetch(client, url=httpserver.url_for("/tides")).json()["content"]
    assert seen == [None, '"v1"', '"v2"']
    assert CachedDocument.objects.get().etag == '"v2"'


def test_recover_serves_the_stale_copy_when_the_upstream_fails(agent, httpserver, open_loopback, settings):
    settings.SIFT_CACHE_TTL = 0
    _, client = agent
    answers = iter(
        [
            Response(ARTICLE, content_type="text/html"),
            Response("down", status=500),
            Response("down", status=500),
        ]
    )
    httpserver.expect_request("/tides").respond_with_handler(lambda request: next(answers))
    _fetch(client, url=httpserver.url_for("/tides"))
    plain = _fetch(client, url=httpserver.url_for("/tides"))
    assert (plain.status_code, plain.json()["code"], plain.json()["upstream_status"]) == (
        502,
        "upstream_5xx",
        500,
    )
    recovered = _fetch(client, url=httpserver.url_for("/tides"), recover="true").json()
    assert (recovered["stale"], recovered["cached"]) == (True, True)
    assert recovered["cached_at"]
    assert "Spring tides" in recovered["content"]


@pytest.mark.parametrize(("status", "recovered"), [(503, True), (429, False)])
def test_recover_covers_a_503_but_not_a_429(agent, httpserver, open_loopback, settings, status, recovered):
    settings.SIFT_CACHE_TTL = 0
    _, client = agent
    answers = iter([Response(ARTICLE, content_type="text/html"), Response("busy", status=status)])
    httpserver.expect_request("/tides").respond_with_handler(lambda request: next(answers))
    _fetch(client, url=httpserver.url_for("/tides"))
    response = _fetch(client, url=httpserver.url_for("/tides"), recover="true")
    assert (response.status_code == 200) is recovered
    assert (response.json().get("stale") is True) is recovered


def test_the_cache_keeps_to_its_byte_budget(agent, httpserver, open_loopback, settings):
    settings.SIFT_CACHE_MAX_BYTES = 2500
    _, client = agent
    for name in ("a", "b", "c"):
        httpserver.expect_request(f"/{name}").respond_with_data(name * 1000, content_type="text/plain")
        _fetch(client, url=httpserver.url_for(f"/{name}"))
    kept = sorted(CachedDocument.objects.values_list("url", flat=True))
    assert kept == [httpserver.url_for("/b"), httpserver.url_for("/c")]


def test_recover_serves_the_stale_copy_when_the_site_is_unreachable(agent, open_loopback, settings):
    settings.SIFT_CACHE_TTL = 0
    _, client = agent
    with slow_upstream(delay=0) as base:
        assert _fetch(client, url=f"{base}/page").status_code == 200
    refused = _fetch(client, url=f"{base}/page")
    assert (refused.status_code, refused.json()["code"]) == (502, "upstream_5xx")
    recovered = _fetch(client, url=f"{base}/page", recover="true")
    assert recovered.status_code == 200
    assert (recovered.json()["stale"], recovered.json()["content"]) == (True, "slow but here")


def _sample(client, name: str) -> float:
    text = client.get("/metrics").content.decode()
    values = [line.rsplit(" ", 1)[1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(values[0]) if values else 0.0


def test_fetches_and_cache_hits_are_counted_in_metrics(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/tides").respond_with_data(ARTICLE, content_type="text/html")
    httpserver.expect_request("/gone").respond_with_data("no", status=404)
    ok = 'sift_fetch_requests_total{outcome="ok",source="url"}'
    gone = 'sift_fetch_requests_total{outcome="upstream_4xx",source="url"}'
    before = {name: _sample(client.client, name) for name in (ok, gone, "sift_cache_hits_total")}
    _fetch(client, url=httpserver.url_for("/tides"))
    _fetch(client, url=httpserver.url_for("/tides"))
    _fetch(client, url=httpserver.url_for("/gone"))
    assert _sample(client.client, ok) - before[ok] == 2
    assert _sample(client.client, gone) - before[gone] == 1
    assert _sample(client.client, "sift_cache_hits_total") - before["sift_cache_hits_total"] == 1
    assert _sample(client.client, 'sift_fetch_seconds_count{source="url"}') >= 3


def test_a_malformed_fetch_is_answered_with_the_shape_of_a_fetch_not_of_a_batch(agent):
    _, client = agent
    hint = _fetch(client, url="https://example.org/", robots="maybe").json()["hint"]
    assert "GET /v1/fetch?url=" in hint
    assert "targets" not in hint
