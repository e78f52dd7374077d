# ruff: noqa: RUF001 - the look-alike letters and digits are what these tests are about
"""Per-host state is keyed on the host as the network sees it, not as a URL spells it
(docs/politeness.md, docs/security.md "One caller against the others").

Full-width letters, a trailing dot and the short forms of an IPv4 address reach the same host, so
they share its turns and its robots.txt copy: a caller cannot get turns of its own by spelling.
"""

from __future__ import annotations

import itertools

import pytest

from batch.webhooks import events
from fetch.models import CachedDocument
from fetch.politeness import robots
from fetch.wire import hostnames

from .factories import LOOPBACK
from .sites import Answer, site

INTERVAL = 0.5


@pytest.fixture
def open_loopback(settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_CACHE_TTL = 900


@pytest.mark.parametrize(
    ("spelled", "canonical"),
    [
        ("example.org", "example.org"),
        ("EXAMPLE.org", "example.org"),
        ("example.org.", "example.org"),
        ("ｅｘａｍｐｌｅ.org", "example.org"),  # full-width letters
        ("ＥＸＡＭＰＬＥ。org", "example.org"),  # full-width capitals, an ideographic full stop
        ("bücher.de", "xn--bcher-kva.de"),
        ("xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("127.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("１２７.０.０.１", "127.0.0.1"),  # full-width digits
        ("::1", "::1"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("::FFFF:7F00:1", "127.0.0.1"),  # IPv4-mapped: the IPv4 address it reaches
        ("[::ffff:127.0.0.1]", "127.0.0.1"),
        ("::ffff:0:7f00:1", "::ffff:0:7f00:1"),  # IPv4-translated (SIIT): not this machine's address
        ("::127.0.0.1", "::7f00:1"),  # IPv4-compatible, deprecated: connects to no IPv4 address
    ],
)
def test_every_spelling_of_a_host_has_one_canonical_name(spelled, canonical):
    assert hostnames.canonical_host(spelled) == canonical


def test_the_host_interval_spaces_every_spelling_of_one_host(agent, open_loopback, settings):
    _, client = agent
    settings.SIFT_FETCH_HOST_INTERVAL = INTERVAL
    spellings = ["127.0.0.1", "127.1", "127.0.0.1.", "0x7f.0.0.1", "2130706433", "１２７.０.０.１"]
    spellings.append("[::ffff:127.0.0.1]")  # IPv4-mapped IPv6
    paths = [f"/{n}" for n in range(len(spellings))]
    with site("127.0.0.1", {path: Answer() for path in paths}) as upstream:
        for spelling, path in zip(spellings, paths, strict=True):
            response = client.get("/v1/fetch", url=f"http://{spelling}:{upstream.port}{path}")
            assert response.status_code == 200, (spelling, response.content)
        arrivals = upstream.times()
    assert len(arrivals) == len(spellings)
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert all(gap >= INTERVAL for gap in gaps), gaps


def test_every_spelling_of_a_site_reads_one_robots_txt(agent, open_loopback):
    _, client = agent
    routes = {"/robots.txt": Answer(200, b"User-agent: *\nDisallow: /private/\n", "text/plain")}
    routes |= {"/public": Answer(), "/private/x": Answer()}
    with site("127.0.0.1", routes) as upstream:
        answers = [
            client.post(
                "/v1/fetch",
                {"url": f"http://{spelling}:{upstream.port}{path}", "options": {"robots": True}},
            ).status_code
            for spelling, path in [
                ("127.0.0.1", "/public"),
                ("127.1", "/private/x"),
                ("0x7f.1", "/public"),
                ("[::ffff:127.0.0.1]", "/private/x"),
                ("[::ffff:7f00:1]", "/public"),
            ]
        ]
        assert answers == [200, 403, 200, 403, 200]
        assert upstream.count("/robots.txt") == 1
    kept = CachedDocument.objects.get(partition="robots|fleet")
    assert kept.url == f"http://127.0.0.1:{upstream.port}/robots.txt"


@pytest.mark.parametrize(
    ("url", "governed_by"),
    [
        ("http://EXAMPLE.org./a?b#c", "http://example.org/robots.txt"),
        ("http://example.org:80/a", "http://example.org/robots.txt"),
        ("https://example.org:443/a", "https://example.org/robots.txt"),
        ("https://example.org:8443/a", "https://example.org:8443/robots.txt"),
        ("HTTP://127.1:8001/a", "http://127.0.0.1:8001/robots.txt"),
        ("http://[::1]:8001/a", "http://[::1]:8001/robots.txt"),
        ("http://[::ffff:127.0.0.1]:8001/a", "http://127.0.0.1:8001/robots.txt"),
    ],
)
def test_robots_txt_is_asked_for_at_one_spelling_of_the_site(url, governed_by):
    assert robots.robots_url(url) == governed_by


@pytest.mark.parametrize(
    "callback_url",
    [
        "http://127.1:9000/hook",
        "http://0x7f.0.0.1./hook",
        "http://127.0.0.1/hook",
        "http://[::ffff:127.0.0.1]/hook",
    ],
)
def test_a_webhooks_receiving_host_is_its_canonical_name(callback_url):
    assert events.host_of(callback_url) == "127.0.0.1"
