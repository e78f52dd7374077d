"""Monitors through ``/v1/monitors`` and their runs by the worker's code in this process, with the
production fetch against pages served on loopback (docs/api.md, "Monitors"; docs/workers.md,
"Monitors"). A real cluster runs them in ``tests/test_monitors_cluster.py``."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from django_q.models import OrmQ
from werkzeug import Response

from batch.engine import monitor_runs, stopping, wakeups, worker
from batch.engine.seam import Caller
from batch.models import BatchJob, Monitor, MonitorChange, WebhookDelivery, WorkerSlot
from batch.pipeline_bridge import fetch_target
from doors.mcp import tools
from fetch.targets import Target

from .factories import LOOPBACK, SCRIPTED_BASE, ApiClient, MakeCaller, scripted_job

pytestmark = pytest.mark.django_db(transaction=True)


def page(*lines: str) -> str:
    return "<html><body><article>" + "".join(f"<p>{line}</p>" for line in lines) + "</article></body></html>"


@pytest.fixture(autouse=True)
def monitors_allowed(settings: Any) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_MONITOR_MIN_EVERY = 1
    monitor_runs.NEXT_DUE.looked_at = None  # this process looks again at once


class Site:
    def __init__(self, httpserver: Any) -> None:
        self.html, self.status = page("The changelog.", "Version 1.0 is out."), 200
        httpserver.expect_request("/changelog").respond_with_handler(self._answer)
        self.url = httpserver.url_for("/changelog")

    def _answer(self, request: Any) -> Response:
        return Response(self.html, status=self.status, content_type="text/html")


@pytest.fixture
def site(httpserver: Any) -> Site:
    return Site(httpserver)


def create(client: ApiClient, url: str, **fields: Any) -> Any:
    return client.post("/v1/monitors", {"url": url, "every": "1h", **fields})


def run_due(fetch: Any = fetch_target) -> int:
    """Run every due monitor as a drain would; how many ran."""
    ran = 0
    while (run := monitor_runs.claim_if_its_turn(timezone.now())) is not None:
        monitor_runs.run_monitor(run, fetch)
        ran += 1
        monitor_runs.NEXT_DUE.looked_at = None
    return ran


def make_due(monitor_id: str) -> None:
    Monitor.objects.filter(pk=monitor_id).update(due_at=timezone.now() - timedelta(seconds=1))
    monitor_runs.NEXT_DUE.looked_at = None


def test_a_monitor_is_created_listed_read_and_deleted_by_its_caller_only(site: Site, make_caller: MakeCaller):
    _, owner = make_caller("owner")
    _, other = make_caller("other")
    created = create(owner, site.url, options={"grep": "Version"}, every=90)
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["url"], body["every"], body["options"], body["paused"]) == (
        site.url,
        90,
        {"grep": "Version"},
        False,
    )
    assert body["changes_url"] == f"/v1/monitors/{body['id']}/changes"
    listed = owner.get("/v1/monitors").json()
    assert (listed["count"], [m["id"] for m in listed["items"]]) == (1, [body["id"]])
    assert other.get("/v1/monitors").json()["count"] == 0
    for path in (f"/v1/monitors/{body['id']}", f"/v1/monitors/{body['id']}/changes"):
        assert other.get(path).status_code == 404
        assert owner.get(path).status_code == 200
    assert other.delete(f"/v1/monitors/{body['id']}").status_code == 404
    assert owner.delete(f"/v1/monitors/{body['id']}").status_code == 200
    assert owner.get(f"/v1/monitors/{body['id']}").status_code == 404
    assert not Monitor.objects.exists()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"every": 0}, "every"),
        ({"every": "soon"}, "every"),
        ({"every": "40d"}, "every"),
        ({"options": {"cursor": "abc"}}, "options.cursor"),
        ({"options": {"mode": "loud"}}, "options.mode"),
        ({"url": "ftp://example.org/"}, "url"),
    ],
)
def test_a_bad_monitor_is_refused_naming_the_field_and_nothing_is_stored(agent, fields, field):
    _, client = agent
    response = client.post("/v1/monitors", {"url": "https://example.org/", "every": 60, **fields})
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request"
    assert response.json()["details"][0]["field"] == field
    assert response.json()["hint"]
    assert not Monitor.objects.exists()


def test_every_shorter_than_the_least_is_refused(agent, settings):
    settings.SIFT_MONITOR_MIN_EVERY = 300
    response = create(agent[1], "https://example.org/", every="4m")
    assert response.status_code == 400
    assert "300" in response.json()["error"]


def test_the_caps_answer_429_with_a_code_and_a_hint(make_caller: MakeCaller, settings):
    settings.SIFT_MONITORS_PER_CALLER, settings.SIFT_MONITORS_TOTAL = 2, 3
    _, first = make_caller("first")
    _, second = make_caller("second")
    assert [create(first, f"https://example.org/{n}").status_code for n in range(2)] == [201, 201]
    over = create(first, "https://example.org/2")
    assert (over.status_code, over.json()["code"]) == (429, "too_many_monitors")
    assert "DELETE /v1/monitors" in over.json()["hint"]
    assert create(second, "https://example.org/3").status_code == 201
    full = create(second, "https://example.org/4")
    assert (full.status_code, full.json()["code"]) == (429, "monitors_full")
    assert full.json()["hint"]
    assert Monitor.objects.count() == 3


def test_runs_record_new_then_a_change_with_its_diff_and_make_its_webhook_due(site: Site, agent):
    _, client = agent
    monitor_id = create(client, site.url, callback_url="http://127.0.0.1:9/hooks").json()["id"]
    assert run_due() == 1  # due at once: its first reading
    first = client.get(f"/v1/monitors/{monitor_id}").json()
    assert (first["runs"], first["last_outcome"], first["last_change_at"]) == (1, "ok", None)
    assert client.get(f"/v1/monitors/{monitor_id}/changes").json()["count"] == 0
    assert run_due() == 0  # not due again for an hour
    make_due(monitor_id)
    assert run_due() == 1
    assert client.get(f"/v1/monitors/{monitor_id}/changes").json()["count"] == 0  # the same page
    site.html = page("The changelog.", "Version 1.1 is out.", "Version 1.0 is out.")
    make_due(monitor_id)
    assert run_due() == 1
    changes = client.get(f"/v1/monitors/{monitor_id}/changes").json()
    assert changes["count"] == 1
    change = changes["items"][0]
    assert "+Version 1.1 is out." in change["diff"]
    assert (change["added"], change["removed"]) == (2, 0)
    delivery = WebhookDelivery.objects.get()
    assert (delivery.event_type, delivery.url) == ("monitor.changed", "http://127.0.0.1:9/hooks")
    event = json.loads(delivery.body)
    assert (event["data"]["monitor"]["id"], event["data"]["change"]["added"]) == (monitor_id, 2)
    assert "+Version 1.1 is out." in event["data"]["change"]["diff"]
    shown = client.get(f"/v1/monitors/{monitor_id}").json()
    assert (shown["runs"], shown["last_change_at"] is not None) == (3, True)
    # A monitor's last reading is its own: the caller's changes: true reading of the page is new.
    fetched = client.post("/v1/fetch", {"url": site.url, "options": {"changes": True}}).json()
    assert fetched["change"]["status"] == "new"


def test_changes_are_newest_first_paged_and_only_the_last_hundred_are_kept(site: Site, agent):
    _, client = agent
    monitor_id = create(client, site.url).json()["id"]
    for n in range(monitor_runs.CHANGES_KEPT + 3):
        MonitorChange.objects.create(
            monitor_id=monitor_id, at=timezone.now() - timedelta(seconds=200 - n), diff=f"+change {n}"
        )
    run_due()  # the first reading
    site.html = page("Something else entirely.")
    make_due(monitor_id)
    run_due()
    assert MonitorChange.objects.filter(monitor_id=monitor_id).count() == monitor_runs.CHANGES_KEPT
    page_one = client.get(f"/v1/monitors/{monitor_id}/changes", limit=2).json()
    assert page_one["count"] == monitor_runs.CHANGES_KEPT
    assert [c["diff"] for c in page_one["items"]][1] == f"+change {monitor_runs.CHANGES_KEPT + 2}"
    page_two = client.get(f"/v1/monitors/{monitor_id}/changes", limit=2, offset=2).json()
    assert [c["diff"] for c in page_two["items"]] == [
        f"+change {monitor_runs.CHANGES_KEPT + n}" for n in (1, 0)
    ]


def test_a_failing_site_is_a_recorded_failed_run_and_ten_in_a_row_pause_the_monitor(site: Site, agent):
    _, client = agent
    site.status = 500
    monitor_id = create(client, site.url).json()["id"]
    for n in range(1, monitor_runs.MAX_FAILURES_IN_A_ROW + 1):
        assert run_due() == 1
        shown = client.get(f"/v1/monitors/{monitor_id}").json()
        assert (shown["failures_in_a_row"], shown["last_outcome"]) == (n, "upstream_5xx")
        assert "500" in shown["last_error"]
        if not shown["paused"]:
            make_due(monitor_id)
    assert shown["paused"] is True
    assert shown["next_run_at"] is None
    assert "10 failed runs in a row" in shown["paused_reason"]
    assert run_due() == 0


def test_a_success_resets_the_failures_in_a_row(site: Site, agent):
    _, client = agent
    site.status = 500
    monitor_id = create(client, site.url).json()["id"]
    run_due()
    site.status = 200
    make_due(monitor_id)
    run_due()
    assert client.get(f"/v1/monitors/{monitor_id}").json()["failures_in_a_row"] == 0


def test_a_run_holds_a_worker_slot_and_none_is_claimed_when_every_slot_is_taken(agent, settings):
    caller, client = agent
    create(client, "https://example.org/")
    holds: list[int] = []

    def look(who: Caller, target: Target) -> dict[str, Any]:
        holds.append(WorkerSlot.objects.filter(monitor__isnull=False).count())
        return {"content": "x", "meta": {}}

    scripted_job(caller, "block=1")
    target_claim = worker.claim_next_target()
    assert target_claim is not None
    assert monitor_runs.claim_if_its_turn(timezone.now()) is None  # the one slot is the target's
    worker.release_claim(target_claim)
    BatchJob.objects.all().delete()
    assert run_due(look) == 1
    assert holds == [1]
    assert not WorkerSlot.objects.filter(monitor__isnull=False).exists()


def test_a_caller_with_monitors_and_a_batch_gets_one_turn_a_round_not_one_for_each(
    make_caller: MakeCaller, settings
):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 2
    watcher, watcher_client = make_caller("watcher")
    other, _ = make_caller("other")
    for n in range(3):
        create(watcher_client, f"https://example.org/{n}")
    scripted_job(watcher, "a=1", "a=2", "a=3")
    scripted_job(other, "b=1", "b=2", "b=3")
    order: list[str] = []

    def record(who: Caller, target: Target) -> dict[str, Any]:
        order.append(f"{who.name}:{'monitor' if who.scope else 'target'}")
        return {"content": "x", "meta": {}}

    worker.drain(record, budget=30)
    assert len(order) == 9
    # The other caller's targets go every other turn while it has any: the watcher's three
    # monitors and its batch share the watcher's turns.
    assert [n for n, who in enumerate(order) if who == "other:target"] == [1, 3, 5]
    assert order.count("watcher:monitor") == 3
    assert {n: order[n] for n in (0, 2, 4)} == {
        0: "watcher:target",
        2: "watcher:monitor",
        4: "watcher:target",
    }


def test_a_batch_job_is_neither_listed_with_monitors_nor_a_monitor_with_batches(site: Site, agent):
    _, client = agent
    create(client, site.url)
    run_due()
    assert client.get("/v1/batch").json()["count"] == 0
    assert not BatchJob.objects.exists()
    submitted = client.post("/v1/batch", {"targets": [f"{SCRIPTED_BASE}x"]})
    assert submitted.status_code == 202  # a monitor takes no live job place


def test_the_mcp_tools_watch_list_read_changes_and_unwatch_for_their_caller_only(
    site: Site, make_caller: MakeCaller
):
    owner, _ = make_caller("owner")
    other, _ = make_caller("other")

    def call(caller: Any, tool: str, **arguments: Any) -> Any:
        return tools.call(tools.TOOLS[tool], caller, arguments)

    watched = call(owner, "watch", url=site.url, options={"mode": "text"}, every="2h")
    assert watched.ok, watched.body
    monitor_id = watched.body["id"]
    assert (watched.body["every"], watched.body["options"]) == (7200, {"mode": "text"})
    run_due()
    site.html = page("The changelog.", "Version 2.0 is out.")
    make_due(monitor_id)
    run_due()
    listed = call(owner, "monitors")
    assert (listed.body["count"], listed.body["items"][0]["runs"]) == (1, 2)
    changes = call(owner, "monitor_changes", id=monitor_id)
    assert changes.body["count"] == 1
    assert "+Version 2.0 is out." in changes.body["items"][0]["diff"]
    assert call(other, "monitors").body["count"] == 0
    for tool in ("monitor_changes", "unwatch"):
        refused = call(other, tool, id=monitor_id)
        assert (refused.ok, refused.code) == (False, "not_found")
    bad = call(owner, "watch", url=site.url, options={"grep": "("}, every=3600)
    assert (bad.code, bad.body["details"][0]["field"]) == ("invalid_request", "options.grep")
    short = call(owner, "watch", url=site.url, every=0)
    assert (short.code, short.body["details"][0]["field"]) == ("invalid_request", "every")
    assert call(owner, "unwatch", id=monitor_id).ok
    assert not Monitor.objects.exists()


def _samples() -> dict[str, float]:
    text = Client().get("/metrics").content.decode()
    lines = (line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("sift_monitor"))
    return {name: float(value) for name, value in lines}


def test_metrics_count_runs_changes_and_failures_and_show_the_monitors_overdue(site: Site, agent):
    _, client = agent
    before = _samples()
    monitor_id = create(client, site.url).json()["id"]
    run_due()
    site.html = page("Version 3.0 is out.")
    make_due(monitor_id)
    run_due()
    site.status = 500
    make_due(monitor_id)
    run_due()
    after = _samples()
    counted = {
        name: after.get(name, 0) - before.get(name, 0)
        for name in (
            'sift_monitor_runs_total{outcome="ok"}',
            'sift_monitor_runs_total{outcome="upstream_5xx"}',
            "sift_monitor_changes_total",
            "sift_monitor_failures_total",
        )
    }
    assert list(counted.values()) == [2, 1, 1, 1]
    late = create(client, site.url).json()["id"]
    Monitor.objects.filter(pk=late).update(due_at=timezone.now() - timedelta(minutes=2))
    samples = _samples()
    assert (samples["sift_monitors"], samples["sift_monitors_paused"], samples["sift_monitors_overdue"]) == (
        2,
        0,
        1,
    )


def test_a_drain_hands_its_slot_from_run_to_run_and_frees_it_when_it_ends(agent, settings):
    _, client = agent
    for n in range(3):
        create(client, f"https://example.org/{n}")
    held: list[tuple[int, ...]] = []

    def look(who: Caller, target: Target) -> dict[str, Any]:
        held.append(tuple(WorkerSlot.objects.filter(monitor__isnull=False).values_list("number", flat=True)))
        return {"content": "x", "meta": {}}

    assert worker.drain(look, budget=30) == 3
    assert held == [(0,), (0,), (0,)]
    assert not WorkerSlot.objects.filter(monitor__isnull=False).exists()
    assert Monitor.objects.filter(runs=1).count() == 3


def test_a_monitor_falling_due_soon_wakes_the_workers_and_a_later_one_does_not(agent, settings):
    caller, _ = agent
    settings.SIFT_BATCH_WORKERS = 2
    now = timezone.now()
    later = Monitor.objects.create(
        caller=caller,
        url="https://example.org/",
        every=3600,
        created_at=now,
        due_at=now + timedelta(minutes=10),
    )
    assert wakeups.wake_workers() == 0
    Monitor.objects.filter(pk=later.pk).update(due_at=now + timedelta(seconds=30))
    assert wakeups.wake_workers() == 2
    assert OrmQ.objects.count() == 2


def test_a_stop_mid_run_gives_the_run_back_due_at_once_and_frees_its_slot(agent, monkeypatch):
    _, client = agent
    monitor_id = create(client, "https://example.org/").json()["id"]
    monkeypatch.setattr(worker, "IN_FLIGHT", worker.InFlight())
    monkeypatch.setattr(stopping.os, "_exit", lambda code: None)
    started, release = threading.Event(), threading.Event()

    def blocking(who: Caller, target: Target) -> dict[str, Any]:
        started.set()
        release.wait(10)
        return {"content": "late", "meta": {}}

    def drain_in_a_thread() -> None:
        try:
            worker.drain(blocking, budget=30)
        finally:
            connection.close()

    drain = threading.Thread(target=drain_in_a_thread)
    drain.start()
    try:
        assert started.wait(10)
        stopping.stop_worker_process(grace=0.5)
        shown = Monitor.objects.get(pk=monitor_id)
        assert shown.due_at is not None
        assert shown.due_at <= timezone.now()
        assert not WorkerSlot.objects.filter(monitor__isnull=False).exists()
    finally:
        release.set()
        drain.join(10)
    assert Monitor.objects.get(pk=monitor_id).runs == 0, "the late answer was dropped"
