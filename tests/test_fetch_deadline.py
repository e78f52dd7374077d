"""A hostile document never holds the answer of /v1/fetch much past the fetch deadline."""

from __future__ import annotations

import time

import pytest

from fetch import pipeline

from .factories import LOOPBACK

# Just under the element count past which the whole page is flattened instead: trafilatura's
# main-content search then runs for many seconds of CPU on it.
HEAVY_PAGE = (
    "<html><body>"
    + "".join(f"<div><p>paragraph {n} of a page built to be slow to read</p></div>" for n in range(24_000))
    + "</body></html>"
)


@pytest.fixture
def short_deadline(settings, monkeypatch):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_FETCH_TIMEOUT = 1.0
    monkeypatch.setattr(pipeline, "EXTRACT_GRACE_SECONDS", 1.0)


def test_a_page_slow_to_extract_is_answered_filter_timeout_by_the_deadline(agent, httpserver, short_deadline):
    _, client = agent
    httpserver.expect_request("/heavy").respond_with_data(HEAVY_PAGE, content_type="text/html")
    started = time.monotonic()
    response = client.get("/v1/fetch", url=httpserver.url_for("/heavy"), mode="text")
    elapsed = time.monotonic() - started
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["code"] == "filter_timeout"
    assert body["hint"]
    # Deadline 1 s from the start, or 1 s after the download: a generous margin on top.
    assert elapsed < 1.0 + 1.0 + 4.0


def test_the_next_fetch_after_a_cut_extraction_is_read(agent, httpserver, short_deadline, settings):
    _, client = agent
    httpserver.expect_request("/heavy").respond_with_data(HEAVY_PAGE, content_type="text/html")
    httpserver.expect_request("/light").respond_with_data(
        "<html><body><p>A short page that reads at once.</p></body></html>", content_type="text/html"
    )
    assert client.get("/v1/fetch", url=httpserver.url_for("/heavy")).status_code == 422
    settings.SIFT_FETCH_TIMEOUT = 30.0
    response = client.get("/v1/fetch", url=httpserver.url_for("/light"), mode="text")
    assert response.status_code == 200, response.content
    assert "reads at once" in response.json()["content"]
