"""``changes: true`` on every door (docs/api.md, "Changes"): a reading against the same caller's
last reading of the same URL and reading options, through ``/v1/fetch``, a batch target run by the
worker with the production fetch, and MCP's ``fetch`` tool; against pages served on loopback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from werkzeug import Response

from batch import jobs
from batch.engine import worker
from batch.models import ApiKey, BatchTarget
from batch.pipeline_bridge import fetch_target
from doors.mcp import tools
from doors.validation import validate_targets
from fetch.changes.diff import unified
from fetch.models import LastReading

from .factories import LOOPBACK, MakeCaller

pytestmark = pytest.mark.django_db(transaction=True)

Door = Callable[[tuple[ApiKey, Any], str, dict[str, Any]], dict[str, Any]]


def page(*lines: str) -> str:
    paragraphs = "".join(f"<p>{line}</p>" for line in lines)
    return f"<html><head><title>Prices</title></head><body><article>{paragraphs}</article></body></html>"


class Served:
    """The page the site answers now, changed by the test between readings; counts requests."""

    def __init__(self, httpserver: Any) -> None:
        self.html = page("Plan A costs 10 euros a month.", "Plan B costs 20 euros a month.")
        self.requests = 0
        httpserver.expect_request("/prices").respond_with_handler(self._answer)
        self.url = httpserver.url_for("/prices")

    def _answer(self, request: Any) -> Response:
        self.requests += 1
        return Response(self.html, content_type="text/html", headers={"Cache-Control": "max-age=600"})


@pytest.fixture
def served(httpserver: Any, settings: Any) -> Served:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_CACHE_TTL = 900
    return Served(httpserver)


def rest(caller: tuple[ApiKey, Any], url: str, options: dict[str, Any]) -> dict[str, Any]:
    response = caller[1].post("/v1/fetch", {"url": url, "options": options})
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def batch(caller: tuple[ApiKey, Any], url: str, options: dict[str, Any]) -> dict[str, Any]:
    """One target submitted, claimed and fetched by the worker's code with the production fetch."""
    job = jobs.submit(caller[0], validate_targets([{"url": url, "options": options}])).job
    claim = worker.claim_next_target()
    assert claim is not None
    assert claim.job_id == job.id
    worker.run_claim(claim, fetch_target)
    target = BatchTarget.objects.get(job=job)
    assert target.status == "done", (target.error, target.hint)
    BatchTarget.objects.filter(job=job).delete()
    job.delete()
    return {"content": target.result["content"], **target.result["meta"]}


def mcp(caller: tuple[ApiKey, Any], url: str, options: dict[str, Any]) -> dict[str, Any]:
    outcome = tools.call(tools.TOOLS["fetch"], caller[0], {"url": url, **options})
    assert outcome.ok, outcome.body
    return outcome.body


DOORS = {"rest": rest, "batch": batch, "mcp": mcp}


@pytest.mark.parametrize("door", DOORS)
def test_a_reading_is_new_then_same_then_changed_with_a_diff_of_the_whole_text(
    door: str, served: Served, agent: tuple[ApiKey, Any]
):
    read = DOORS[door]
    first = read(agent, served.url, {"changes": True})
    assert first["change"] == {
        "status": "new",
        "previous_at": None,
        "diff": None,
        "added": 0,
        "removed": 0,
        "diff_truncated": False,
    }
    again = read(agent, served.url, {"changes": True})
    assert again["change"]["status"] == "same"
    assert again["change"]["previous_at"] is not None
    assert (again["change"]["diff"], again["change"]["added"], again["change"]["removed"]) == ("", 0, 0)
    served.html = page("Plan A costs 12 euros a month.", "Plan B costs 20 euros a month.", "Plan C is new.")
    # A short slice: the lines are counted over the whole text, and the diff cut like content.
    changed = read(agent, served.url, {"changes": True, "max_chars": 120})
    change = changed["change"]
    assert change["status"] == "changed"
    assert (change["added"], change["removed"]) == (3, 1)  # a blank line and Plan C, Plan A's new price
    assert "-Plan A costs 10 euros a month." in change["diff"]
    assert "+Plan A costs 12 euros a month." in change["diff"]
    assert change["diff_truncated"] is True  # cut like content, at a line end
    assert len(change["diff"]) <= 120
    assert "Plan C" not in change["diff"]
    assert len(changed["content"]) <= 120
    # Every reading asked the site: max_age is 0 with changes, the cache's copy is not answered.
    assert served.requests == 3
    assert changed["cache"] in ("miss", "revalidated")


@pytest.mark.parametrize("door", DOORS)
def test_the_reading_options_make_the_key_and_the_slice_and_freshness_do_not(
    door: str, served: Served, agent: tuple[ApiKey, Any]
):
    read = DOORS[door]
    assert read(agent, served.url, {"changes": True})["change"]["status"] == "new"
    # Other reading options are another reading: new, each.
    assert read(agent, served.url, {"changes": True, "mode": "text"})["change"]["status"] == "new"
    assert read(agent, served.url, {"changes": True, "grep": "Plan B"})["change"]["status"] == "new"
    assert read(agent, served.url, {"changes": True, "hidden": "keep"})["change"]["status"] == "new"
    # max_chars, max_age and robots do not make another reading.
    same = {"changes": True, "max_chars": 30, "max_age": 0, "recover": True}
    assert read(agent, served.url, same)["change"]["status"] == "same"
    served.html = page("Plan A costs 10 euros a month.", "Plan B costs 25 euros a month.")
    grep = read(agent, served.url, {"changes": True, "grep": "Plan B"})["change"]
    assert grep["status"] == "changed"
    assert (grep["added"], grep["removed"]) == (1, 1)
    assert "Plan A" not in grep["diff"]
    assert LastReading.objects.count() == 4


@pytest.mark.parametrize("door", DOORS)
def test_one_callers_readings_are_never_compared_with_anothers(
    door: str, served: Served, make_caller: MakeCaller
):
    read = DOORS[door]
    first, second = make_caller("first"), make_caller("second")
    assert read(first, served.url, {"changes": True})["change"]["status"] == "new"
    served.html = page("Plan A is gone.")
    assert read(second, served.url, {"changes": True})["change"]["status"] == "new"
    assert read(first, served.url, {"changes": True})["change"]["status"] == "changed"
    assert read(second, served.url, {"changes": True})["change"]["status"] == "same"
    assert sorted(LastReading.objects.values_list("caller", flat=True)) == ["first", "second"]


def test_without_changes_nothing_is_kept_and_no_change_is_answered(served: Served, agent):
    body = rest(agent, served.url, {})
    assert "change" not in body
    assert not LastReading.objects.exists()


def test_a_batch_with_changes_is_never_answered_by_an_earlier_twin(served: Served, agent):
    caller, _ = agent
    targets = validate_targets([{"url": served.url, "options": {"changes": True, "max_age": 600}}])
    first = jobs.submit(caller, targets)
    jobs.cancel_for_caller(caller, first.job.id)
    assert jobs.submit(caller, targets).reused is False


def test_a_callers_readings_are_bounded_by_count_and_bytes_oldest_first(
    served: Served, agent, settings, httpserver
):
    settings.SIFT_CHANGES_PER_CALLER = 2
    for n in range(3):
        httpserver.expect_request(f"/p{n}").respond_with_data(
            page(f"Page {n} says hello."), content_type="text/html"
        )
        rest(agent, httpserver.url_for(f"/p{n}"), {"changes": True})
    assert sorted(LastReading.objects.values_list("url", flat=True)) == [
        httpserver.url_for("/p1"),
        httpserver.url_for("/p2"),
    ]
    assert rest(agent, httpserver.url_for("/p0"), {"changes": True})["change"]["status"] == "new"
    newest = LastReading.objects.order_by("-read_at").first()
    assert newest is not None
    settings.SIFT_CHANGES_BYTES_PER_CALLER = newest.n_bytes * 3 // 2  # room for one such reading
    httpserver.expect_request("/p3").respond_with_data(page("Page 3 says hello."), content_type="text/html")
    rest(agent, httpserver.url_for("/p3"), {"changes": True})
    assert list(LastReading.objects.values_list("url", flat=True)) == [httpserver.url_for("/p3")]


def test_a_diff_counts_every_line_and_is_cut_at_a_line_end():
    before = "\n".join(f"line {n}" for n in range(100))
    after = "\n".join(f"line {n}" if n % 10 else f"new {n}" for n in range(100))
    whole = unified(before, after, most_chars=100_000)
    assert (whole.added, whole.removed, whole.truncated) == (10, 10, False)
    cut = unified(before, after, most_chars=200)
    assert (cut.added, cut.removed, cut.truncated) == (10, 10, True)
    assert whole.text.startswith(cut.text)
    assert len(cut.text) <= 200
    assert whole.text[len(cut.text)] == "\n"
