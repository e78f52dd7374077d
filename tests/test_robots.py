"""``robots: true``: the site's robots.txt decides, read once and cached (docs/politeness.md).

Through the API, against sites served on loopback: /v1/fetch in this process, and a batch through
a real qcluster.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from batch import jobs
from batch.models import BatchJob
from doors.validation import validate_targets
from fetch.models import CachedDocument

from .deployment import Deployment, wait_for
from .factories import LOOPBACK
from .sites import Answer, Site, site

ROBOTS = b"""# Every crawler but sift may read nothing.
User-agent: *
Disallow: /

User-agent: sift
Disallow: /private/
Allow: /private/open-
Disallow: /*.pdf$
Disallow: /drafts/*/secret
Disallow: /same
Allow: /same
"""
PAGES = ["/public", "/private/x", "/private/open-house", "/a.pdf", "/a.pdfx", "/drafts/2026/secret", "/same"]


def _robots(body: bytes = ROBOTS, status: int = 200, delay: float = 0.0) -> dict[str, Answer]:
    routes = {path: Answer() for path in PAGES}
    routes["/robots.txt"] = Answer(status, body, "text/plain", delay)
    return routes


@pytest.fixture
def open_loopback(settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_CACHE_TTL = 900


@pytest.fixture
def ruled() -> Iterator[Site]:
    with site(routes=_robots()) as served:
        yield served


def _fetch(client, url: str, **options):
    return client.post("/v1/fetch", {"url": url, "options": {"robots": True, **options}})


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/public", True),  # the sift group applies, not the * group that disallows everything
        ("/private/x", False),
        ("/private/open-house", True),  # the longer Allow wins over the shorter Disallow
        ("/a.pdf", False),  # a wildcard anchored at the end
        ("/a.pdfx", True),
        ("/drafts/2026/secret", False),  # a wildcard in the middle
        ("/same", True),  # an Allow as long as the Disallow wins
    ],
)
def test_robots_txt_decides_each_url_for_sift(agent, open_loopback, ruled, path, allowed):
    _, client = agent
    response = _fetch(client, ruled.url(path))
    if allowed:
        assert response.status_code == 200, response.content
        assert "Waves come and go" in response.json()["content"]
        assert ruled.count(path) == 1
    else:
        assert response.status_code == 403, response.content
        body = response.json()
        assert body["code"] == "blocked"
        assert "robots.txt" in body["error"]
        assert "robots.txt" in body["hint"]
        assert ruled.count(path) == 0  # refused before any request for the page


def test_robots_txt_is_read_once_for_many_fetches_of_a_site(agent, open_loopback, ruled):
    _, client = agent
    statuses = [_fetch(client, ruled.url(path)).status_code for path in PAGES]
    assert statuses == [200, 403, 200, 403, 200, 403, 200]
    assert ruled.count("/robots.txt") == 1
    assert CachedDocument.objects.filter(partition="robots|fleet", url=ruled.url("/robots.txt")).exists()


def test_without_the_option_robots_txt_is_never_asked(agent, open_loopback, ruled):
    _, client = agent
    response = client.post("/v1/fetch", {"url": ruled.url("/private/x")})
    assert response.status_code == 200, response.content
    assert ruled.count("/robots.txt") == 0


def test_the_option_works_as_a_query_parameter(agent, open_loopback, ruled):
    _, client = agent
    assert client.get("/v1/fetch", url=ruled.url("/private/x"), robots="true").status_code == 403
    assert client.get("/v1/fetch", url=ruled.url("/private/x"), robots="false").status_code == 200


def test_a_robots_txt_that_is_not_there_allows_everything_and_is_remembered(agent, open_loopback):
    _, client = agent
    with site(routes={"/private/x": Answer(), "/other": Answer()}) as missing:  # robots.txt: 404
        assert _fetch(client, missing.url("/private/x")).status_code == 200
        assert _fetch(client, missing.url("/other")).status_code == 200
        assert missing.count("/robots.txt") == 1


@pytest.mark.parametrize("status", [500, 503, 429, 304])  # a 304 answers only a conditional request
def test_a_failing_robots_txt_disallows_everything(agent, open_loopback, status):
    _, client = agent
    with site(routes=_robots(b"oops", status=status)) as failing:
        response = _fetch(client, failing.url("/public"))
        assert response.status_code == 403, response.content
        body = response.json()
        assert body["code"] == "blocked"
        assert str(status) in body["error"]
        assert "robots.txt" in body["hint"]
        assert failing.count("/public") == 0
        # Not remembered: the next fetch asks again, and may find the site well again.
        failing.routes["/robots.txt"] = Answer(200, ROBOTS, "text/plain")
        assert _fetch(client, failing.url("/public")).status_code == 200
        assert failing.count("/robots.txt") == 2


def test_an_unreachable_site_is_blocked_for_its_robots_txt(agent, open_loopback):
    _, client = agent
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    response = _fetch(client, f"http://127.0.0.1:{port}/page")
    assert response.status_code == 403, response.content
    assert response.json()["code"] == "blocked"
    assert "robots.txt" in response.json()["hint"]


def test_a_robots_txt_slower_than_its_deadline_disallows_everything(agent, open_loopback, settings):
    _, client = agent
    settings.SIFT_FETCH_TIMEOUT = 2.0  # robots.txt gets half of it
    with site(routes=_robots(delay=3.0)) as slow:
        response = _fetch(client, slow.url("/public"))
        assert response.status_code == 403, response.content
        assert "robots.txt" in response.json()["hint"]
        assert slow.count("/public") == 0


def test_a_refused_site_is_refused_by_the_guard_not_for_its_robots_txt(agent, open_loopback, settings):
    _, client = agent
    response = _fetch(client, "http://10.0.0.1/page")
    assert response.status_code == 403
    assert "robots.txt" not in response.json()["error"] + response.json()["hint"]


def test_a_rendered_target_is_checked_against_robots_txt_first(agent, open_loopback, ruled):
    _, client = agent
    response = _fetch(client, ruled.url("/private/x"), render=True)
    assert response.status_code == 403, response.content
    assert "robots.txt" in response.json()["hint"]
    assert ruled.count("/private/x") == 0


def test_robots_must_be_a_boolean(agent, open_loopback):
    _, client = agent
    response = client.post("/v1/fetch", {"url": "http://127.0.0.1/", "options": {"robots": "yes"}})
    assert response.status_code == 400
    assert response.json()["details"][0]["field"] == "options.robots"
    batch = client.post("/v1/batch", {"targets": [{"url": "http://127.0.0.1/", "options": {"robots": 1}}]})
    assert batch.status_code == 400
    assert batch.json()["details"][0]["field"] == "targets[0].options.robots"


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_a_batch_obeys_robots_txt_target_by_target(tmp_path, agent, ruled):
    caller, _ = agent
    deployment = Deployment(tmp_path, {"SIFT_TEST_FETCH_FUNC": "", "SIFT_FETCH_ALLOW_CIDRS": "127.0.0.0/8"})
    deployment.start_cluster()
    try:
        targets = [{"url": ruled.url(path), "options": {"robots": True}} for path in PAGES]
        job = jobs.submit(caller, validate_targets([*targets, ruled.url("/private/x")])).job
        wait_for(lambda: not BatchJob.objects.get(pk=job.pk).is_live, timeout=60, what="the job to finish")
    finally:
        deployment.stop_all()
    job.refresh_from_db()
    assert (job.status, job.targets_done, job.targets_failed) == ("partial", 8, 3)
    ends = [(t.status, t.outcome) for t in job.targets.order_by("idx")]
    blocked = ("failed", "blocked")
    done = ("done", None)
    assert ends == [done, blocked, done, blocked, done, blocked, done, done]
    assert all("robots.txt" in t.hint for t in job.targets.filter(outcome="blocked"))
    assert ruled.count("/robots.txt") == 1  # one worker (the default): one read, then the cache
    assert ruled.count("/private/x") == 1  # only the target without robots: true
