"""Freshness a caller can ask for (``max_age``) and see (``cache``, ``age``), on ``/v1/fetch`` GET
and POST and on batch targets, against pages served on loopback (docs/api.md, "Freshness")."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone
from werkzeug import Request, Response

from batch import jobs, pipeline_bridge
from batch.engine import worker
from doors.validation import validate_targets
from fetch.models import CachedDocument

from .factories import LOOPBACK
from .upstream import ARTICLE


@pytest.fixture
def open_loopback(settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_CACHE_TTL = 900


@pytest.fixture
def clock() -> Iterator[time_machine.Traveller]:
    """Now, running on, to be moved forward by the test (``clock.shift(seconds)``)."""
    with time_machine.travel(timezone.now(), tick=True) as traveller:
        yield traveller


def _versions(httpserver, path: str, *answers: Response) -> list[Request]:
    """Serve ``answers`` to the requests of ``path`` in turn; the requests are logged in the list."""
    asked: list[Request] = []
    queue = iter(answers)

    def handler(request: Request) -> Response:
        asked.append(request)
        return next(queue)

    httpserver.expect_request(path).respond_with_handler(handler)
    return asked


def _page(words: str, **headers: str) -> Response:
    return Response(f"<html><body><p>{words}</p></body></html>", content_type="text/html", headers=headers)


def test_max_age_answers_a_copy_younger_than_it_and_fetches_one_older_again(
    agent, httpserver, open_loopback, clock
):
    _, client = agent
    asked = _versions(httpserver, "/tides", _page("first words"), _page("second words"))
    url = httpserver.url_for("/tides")
    first = client.get("/v1/fetch", url=url).json()
    clock.shift(30)
    young = client.get("/v1/fetch", url=url, max_age=60).json()
    clock.shift(60)
    within_ttl = client.get("/v1/fetch", url=url).json()
    too_old = client.post("/v1/fetch", {"url": url, "options": {"max_age": 60}}).json()

    assert (first["cache"], first["age"]) == ("miss", 0)
    assert (young["cache"], young["content"]) == ("hit", "first words")
    assert 30 <= young["age"] < 40
    assert (within_ttl["cache"], within_ttl["content"]) == ("hit", "first words")
    assert 90 <= within_ttl["age"] < 100
    assert (too_old["cache"], too_old["age"], too_old["content"]) == ("miss", 0, "second words")
    assert (too_old["cached"], too_old["stale"], too_old["cached_at"]) == (False, False, None)
    assert len(asked) == 2


def test_max_age_0_always_asks_the_site(agent, httpserver, open_loopback):
    _, client = agent
    asked = _versions(httpserver, "/tides", _page("one"), _page("two"), _page("three"))
    url = httpserver.url_for("/tides")
    answers = [
        client.get("/v1/fetch", url=url, max_age=0).json(),
        client.post("/v1/fetch", {"url": url, "options": {"max_age": 0}}).json(),
        client.get("/v1/fetch", url=url, max_age="0").json(),
    ]
    assert [(a["cache"], a["age"], a["content"]) for a in answers] == [
        ("miss", 0, "one"),
        ("miss", 0, "two"),
        ("miss", 0, "three"),
    ]
    assert len(asked) == 3
    assert client.get("/v1/fetch", url=url).json()["cache"] == "hit"


def test_a_max_age_above_the_ttl_answers_no_copy_older_than_the_ttl(agent, httpserver, open_loopback, clock):
    _, client = agent
    asked = _versions(httpserver, "/tides", _page("first words"), _page("second words"))
    url = httpserver.url_for("/tides")
    client.get("/v1/fetch", url=url)
    clock.shift(1000)  # past the TTL of 900 s, within the max_age
    again = client.get("/v1/fetch", url=url, max_age=86400).json()
    assert (again["cache"], again["content"]) == ("miss", "second words")
    assert len(asked) == 2


@pytest.mark.parametrize(
    ("validator", "condition"),
    [
        (("ETag", '"v1"'), "If-None-Match"),
        (("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"), "If-Modified-Since"),
    ],
)
def test_a_copy_too_old_for_max_age_is_revalidated_and_a_304_refreshes_it_without_a_download(
    agent, httpserver, open_loopback, clock, validator, condition
):
    _, client = agent
    name, value = validator
    asked = _versions(httpserver, "/tides", _page("kept words", **{name: value}), Response(status=304))
    url = httpserver.url_for("/tides")
    client.get("/v1/fetch", url=url)
    first_fetched_at = CachedDocument.objects.get().fetched_at
    clock.shift(120)
    revalidated = client.get("/v1/fetch", url=url, max_age=60).json()
    clock.shift(30)
    after = client.get("/v1/fetch", url=url, max_age=60).json()

    assert [request.headers.get(condition) for request in asked] == [None, value]
    assert (revalidated["cache"], revalidated["content"], revalidated["status"]) == (
        "revalidated",
        "kept words",
        200,
    )
    assert revalidated["age"] < 10
    assert (revalidated["cached"], revalidated["stale"]) == (True, False)
    assert CachedDocument.objects.get().fetched_at >= first_fetched_at + timedelta(seconds=120)
    # The refreshed copy counts from the 304: 30 s later it is still young enough for max_age 60.
    assert (after["cache"], after["content"]) == ("hit", "kept words")
    assert 30 <= after["age"] < 40
    assert len(asked) == 2


def test_max_age_0_with_recover_asks_the_site_first_and_answers_the_last_copy_when_it_fails(
    agent, httpserver, open_loopback, clock
):
    _, client = agent
    asked = _versions(
        httpserver,
        "/tides",
        Response(ARTICLE, content_type="text/html"),
        _page("new words"),
        Response("down", status=500),
        Response("down", status=500),
    )
    url = httpserver.url_for("/tides")
    client.get("/v1/fetch", url=url)
    options = {"max_age": 0, "recover": True}
    asked_first = client.post("/v1/fetch", {"url": url, "options": options}).json()
    clock.shift(45)
    recovered = client.post("/v1/fetch", {"url": url, "options": options})
    failed = client.get("/v1/fetch", url=url, max_age=0)

    assert (asked_first["cache"], asked_first["content"]) == ("miss", "new words")
    assert recovered.status_code == 200, recovered.content
    body = recovered.json()
    assert (body["cache"], body["content"], body["stale"], body["cached"]) == (
        "stale",
        "new words",
        True,
        True,
    )
    assert 45 <= body["age"] < 55
    assert body["cached_at"] == body["fetched_at"]
    assert (failed.status_code, failed.json()["code"]) == (502, "upstream_5xx")
    assert len(asked) == 4


@pytest.mark.parametrize(
    ("value", "query"),
    [(-1, "-1"), ("60", "sixty"), (1.5, "1.5"), (True, "")],
)
def test_a_max_age_that_is_not_a_whole_number_of_seconds_is_refused_naming_it(agent, value, query):
    _, client = agent
    posted = client.post("/v1/fetch", {"url": "https://example.org/", "options": {"max_age": value}})
    assert (posted.status_code, posted.json()["details"][0]["field"]) == (400, "options.max_age")
    assert "must be a whole number from 0" in posted.json()["error"]
    if query:
        asked = client.get("/v1/fetch", url="https://example.org/", max_age=query)
        assert asked.status_code == 400
        assert "max_age" in asked.json()["details"][0]["field"]


def test_batch_targets_carry_cache_and_age_and_keep_to_max_age(agent, httpserver, open_loopback, settings):
    caller, client = agent
    settings.SIFT_BATCH_WORKERS = 1
    asked = _versions(httpserver, "/tides", _page("first words"), _page("second words"))
    url = httpserver.url_for("/tides")
    client.get("/v1/fetch", url=url)
    job = jobs.submit(caller, validate_targets([url, {"url": url, "options": {"max_age": 0}}])).job

    assert worker.drain(pipeline_bridge.fetch_target, budget=60) == 2

    results = [t["result"]["meta"] for t in client.get(f"/v1/batch/{job.id}").json()["targets"]]
    cached, fresh = results
    assert (cached["cache"], cached["cached"], cached["stale"]) == ("hit", True, False)
    assert isinstance(cached["age"], int)
    assert cached["age"] >= 0
    assert (fresh["cache"], fresh["age"], fresh["cached"]) == ("miss", 0, False)
    assert len(asked) == 2


def test_a_repeated_batch_is_answered_by_its_twin_only_within_the_max_age_of_its_targets(
    agent, httpserver, open_loopback, settings, clock
):
    _, client = agent
    httpserver.expect_request("/tides").respond_with_data("<p>words</p>", content_type="text/html")
    url = httpserver.url_for("/tides")

    def submit(max_age: int) -> dict:
        response = client.post("/v1/batch", {"targets": [{"url": url, "options": {"max_age": max_age}}]})
        assert response.status_code in (200, 202), response.content
        worker.drain(pipeline_bridge.fetch_target, budget=60)
        return response.json()

    first = submit(60)
    clock.shift(30)
    twin = submit(60)
    clock.shift(40)
    later = submit(60)
    never = [submit(0), submit(0)]

    assert (twin["id"], twin["reused"]) == (first["id"], True)
    assert (later["reused"], later["id"] != first["id"]) == (False, True)
    assert [n["reused"] for n in never] == [False, False]
    assert len({job["id"] for job in [first, later, *never]}) == 4


def test_a_304_to_a_request_that_was_not_conditional_is_an_upstream_error(
    agent, httpserver, open_loopback, clock
):
    """Only a request sent with validators may be answered 304: a site that answers 304 to
    everything neither revalidates a copy stored without validators nor serves a first fetch."""
    _, client = agent
    asked = _versions(httpserver, "/tides", _page("kept words"), *[Response(status=304)] * 2)
    url = httpserver.url_for("/tides")
    assert client.get("/v1/fetch", url=url).json()["cache"] == "miss"  # a copy without validators
    clock.shift(120)
    too_old = client.get("/v1/fetch", url=url, max_age=60)
    recovered = client.post("/v1/fetch", {"url": url, "options": {"max_age": 60, "recover": True}})
    httpserver.expect_request("/new").respond_with_response(Response(status=304))
    never_seen = client.get("/v1/fetch", url=httpserver.url_for("/new"))

    assert len(asked) == 3
    assert not any({"If-None-Match", "If-Modified-Since"} & set(request.headers.keys()) for request in asked)
    assert too_old.status_code == 502, too_old.content
    assert too_old.json()["code"] == "upstream_5xx"
    assert "304" in too_old.json()["error"]
    assert "not conditional" in too_old.json()["error"]
    assert (recovered.json()["cache"], recovered.json()["content"]) == ("stale", "kept words")
    assert never_seen.status_code == 502, never_seen.content
    assert CachedDocument.objects.get().fetched_at < timezone.now() - timedelta(seconds=100)
