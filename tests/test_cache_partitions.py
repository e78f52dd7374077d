"""No caller name reaches another caller's cache partition, nor another kind's
(docs/fetch-pipeline.md "Partitions", docs/security.md "One caller against the others")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fetch import cache
from fetch.models import CachedDocument

from .factories import LOOPBACK
from .sites import Answer, site

KINDS = ("page", "rendered", "robots")
# Names made of what partition names are made of, so that collisions are likely if possible.
NAMES = st.text(alphabet=st.sampled_from("a:|restrictdfleobs"), min_size=1, max_size=24)
CLASSES = st.sampled_from(["fleet", "restricted"])


def _partition(name: str, caller_class: str, kind: str) -> str:
    page = cache.partition_for(name, caller_class)
    return page if kind == "page" else cache.kind_partition(kind, page)


@given(
    first=st.tuples(NAMES, CLASSES, st.sampled_from(KINDS)),
    second=st.tuples(NAMES, CLASSES, st.sampled_from(KINDS)),
)
def test_two_partitions_are_one_only_for_one_caller_and_kind(first, second):
    def owner(name: str, caller_class: str, kind: str) -> tuple[str, str, str]:
        return ("" if caller_class == "fleet" else name, caller_class, kind)

    if owner(*first) != owner(*second):
        assert _partition(*first) != _partition(*second)
    else:
        assert _partition(*first) == _partition(*second)


def test_the_longest_name_fits_every_kind_of_partition():
    longest = "n" * 100  # ApiKey.name's max_length
    partition_size = CachedDocument._meta.get_field("partition").max_length
    assert all(len(_partition(longest, "restricted", kind)) <= partition_size for kind in KINDS)


@pytest.mark.django_db
def test_a_caller_named_like_anothers_robots_partition_does_not_read_it(make_caller, settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_CACHE_TTL = 900
    _, alice = make_caller("alice", caller_class="restricted")
    _, impostor = make_caller("alice:robots", caller_class="restricted")
    routes = {"/robots.txt": Answer(200, b"User-agent: *\nDisallow: /x\n", "text/plain"), "/page": Answer()}
    with site("127.0.0.1", routes) as upstream:
        response = alice.post("/v1/fetch", {"url": upstream.url("/page"), "options": {"robots": True}})
        assert response.status_code == 200, response.content
        assert upstream.count("/robots.txt") == 1
        read = impostor.get("/v1/fetch", url=upstream.url("/robots.txt"), mode="raw")
        assert read.status_code == 200, read.content
        assert read.json()["cached"] is False
        assert upstream.count("/robots.txt") == 2  # asked upstream: alice's copy was not served
    assert set(CachedDocument.objects.values_list("partition", flat=True)) == {
        "restricted:alice",
        "robots|restricted:alice",
        "restricted:alice:robots",
    }
