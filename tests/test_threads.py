"""Request threads lent out per caller: waits and fetches cannot fill a process's threads."""

from __future__ import annotations

from batch.threads import ThreadShares
from doors import direct

from .factories import LOOPBACK


def test_a_caller_gets_at_most_its_shares_and_others_still_get_theirs():
    shares = ThreadShares(lambda: 2, lambda: 3)
    with shares.share(1) as first, shares.share(1) as second, shares.share(1) as third:
        assert (first, second, third) == (True, True, False)
        with shares.share(2) as other, shares.share(3) as over_total:
            assert (other, over_total) == (True, False)
    with shares.share(1) as again:
        assert again


def test_a_share_is_given_back_when_the_request_fails():
    shares = ThreadShares(lambda: 1, lambda: None)
    try:
        with shares.share(1):
            raise RuntimeError("the request broke")
    except RuntimeError:
        pass
    with shares.share(1) as granted:
        assert granted


def test_a_fetch_over_the_callers_share_answers_busy_at_once_and_others_are_served(
    make_caller, httpserver, settings
):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_FETCH_PER_CALLER = 2
    busy_caller, busy_client = make_caller("busy")
    _, other_client = make_caller("other")
    httpserver.expect_request("/page").respond_with_data("plain words", content_type="text/plain")
    url = httpserver.url_for("/page")
    with direct.FETCHES.share(busy_caller.pk), direct.FETCHES.share(busy_caller.pk):
        refused = busy_client.get("/v1/fetch", url=url, mode="raw")
        served = other_client.get("/v1/fetch", url=url, mode="raw")
    assert refused.status_code == 429
    assert refused.json()["code"] == "busy"
    assert refused.headers["Retry-After"] == "2"
    assert "batch" in refused.json()["hint"]
    assert served.status_code == 200
    assert busy_client.get("/v1/fetch", url=url, mode="raw").status_code == 200
