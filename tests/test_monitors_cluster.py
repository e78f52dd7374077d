"""Monitors run by a real cluster (``manage.py run_cluster``) with the production fetch against a
site on loopback, their changes sent by the Procfile's ``webhooks`` line to a receiver on loopback
(docs/api.md, "Monitors"; docs/workers.md, "Monitors")."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from standardwebhooks import Webhook

from batch.models import Monitor

from .deployment import Deployment, wait_for
from .factories import LOOPBACK, SCRIPTED_BASE, scripted_job
from .fetchers import read_calls
from .receiver import receiver
from .sites import Answer, site

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]


def page(*lines: str) -> bytes:
    return (
        "<html><body><article>" + "".join(f"<p>{line}</p>" for line in lines) + "</article></body></html>"
    ).encode()


@pytest.fixture
def cluster(tmp_path, settings) -> Iterator[Deployment]:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_MONITOR_MIN_EVERY = 1
    deployment = Deployment(
        tmp_path,
        {
            "SIFT_TEST_FETCH_FUNC": "",  # the fetch pipeline, as in production
            "SIFT_FETCH_ALLOW_CIDRS": "127.0.0.0/8",
            "SIFT_BATCH_DRAIN_SECONDS": "20s",
            "SIFT_WEBHOOK_RETRY_WAIT": "0.2s",
        },
    )
    deployment.start_cluster()
    deployment.start_webhooks()
    yield deployment
    deployment.stop_all()


def _monitor(client: Any, url: str, **fields: Any) -> str:
    response = client.post("/v1/monitors", {"url": url, "every": 2, **fields})
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def _shown(client: Any, monitor_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/monitors/{monitor_id}")
    assert response.status_code == 200, response.content
    shown: dict[str, Any] = response.json()
    return shown


def test_a_due_monitor_runs_finds_a_change_and_its_signed_webhook_arrives(cluster: Deployment, agent):
    api_key, client = agent
    with site(routes={"/changelog": Answer(body=page("Version 1.0 is out."))}) as served, receiver() as hook:
        monitor_id = _monitor(client, served.url("/changelog"), callback_url=hook.url)
        wait_for(lambda: _shown(client, monitor_id)["runs"] >= 2, 60, "two runs of the same page")
        assert hook.posts() == []  # the first reading is new, the second the same: no change
        served.routes["/changelog"] = Answer(body=page("Version 1.1 is out.", "Version 1.0 is out."))
        changed_at = time.time()
        post = wait_for(hook.posts, 60, "the change's webhook")[0]
        # Within one every plus 10 s, the aim (the engine's part is a second or two: bench.monitor_webhooks).
        assert post.wall - changed_at < 2 + 10
    event = Webhook(api_key.webhook_secret).verify(post.body, post.headers)
    assert event["type"] == "monitor.changed"
    assert event["data"]["monitor"]["id"] == monitor_id
    assert "+Version 1.1 is out." in event["data"]["change"]["diff"]
    changes = client.get(f"/v1/monitors/{monitor_id}/changes").json()
    assert changes["count"] >= 1
    assert changes["items"][0]["diff"] == event["data"]["change"]["diff"]
    # A monitor is not a batch job: none listed, and the caller's live-job place is free.
    assert client.get("/v1/batch").json()["count"] == 0
    assert client.post("/v1/batch", {"targets": [f"{SCRIPTED_BASE}x"]}).status_code == 202


def test_a_failing_site_is_recorded_and_ten_failures_in_a_row_pause_the_monitor_then_delete_stops_it(
    cluster: Deployment, agent
):
    _, client = agent
    with site(routes={"/down": Answer(status=503, body=b"down", content_type="text/plain")}) as served:
        failing = _monitor(client, served.url("/down"), every=1)
        shown = wait_for(lambda: (m := _shown(client, failing))["paused"] and m, 120, "the monitor to pause")
        assert shown["failures_in_a_row"] == 10
        assert shown["last_outcome"] == "busy"
        assert "10 failed runs in a row" in shown["paused_reason"]
        assert served.count("/down") == 10
        time.sleep(3)
        assert served.count("/down") == 10  # paused: no more runs
        served.routes["/up"] = Answer(body=page("All good."))
        deleted = _monitor(client, served.url("/up"), every=1)
        wait_for(lambda: served.count("/up") >= 1, 60, "the second monitor's first run")
        assert client.delete(f"/v1/monitors/{deleted}").status_code == 200
        time.sleep(1)  # a run in flight when it was deleted ends
        runs = served.count("/up")
        time.sleep(3)
        assert served.count("/up") == runs
    assert not Monitor.objects.filter(pk=deleted).exists()


def test_a_callers_monitors_and_its_batch_share_one_turn_of_the_cluster(tmp_path, settings, make_caller):
    settings.SIFT_MONITOR_MIN_EVERY = 1
    watcher, watcher_client = make_caller("watcher")
    other, _ = make_caller("other")
    for n in range(5):
        _monitor(watcher_client, f"{SCRIPTED_BASE}m{n}?sleep=0.1", every=3600)
    scripted_job(watcher, *(f"w={n}&sleep=0.1" for n in range(5)))
    scripted_job(other, *(f"o={n}&sleep=0.1" for n in range(5)))
    deployment = Deployment(tmp_path, {"SIFT_BATCH_DRAIN_SECONDS": "20s"})  # the scripted fetch
    deployment.start_cluster()
    try:
        wait_for(
            lambda: len([c for c in read_calls(tmp_path) if c[0] == "end"]) >= 15, 60, "every run and target"
        )
    finally:
        deployment.stop_all()
    order = [url for event, _, _, url in read_calls(tmp_path) if event == "start"]
    # One worker, one turn a round: the other caller's targets go every other turn while it has any.
    assert [n for n, url in enumerate(order) if "o=" in url] == [1, 3, 5, 7, 9]
    assert sum("/m" in url for url in order) == 5
