"""``manage.py deliver_webhooks``, the Procfile's ``webhooks`` line, as a real process
(docs/webhooks.md, "Where delivery runs"): the only place webhooks are sent from, stopped on
SIGTERM or Ctrl-C with its unfinished attempts given back, alive through a database restart."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from standardwebhooks import Webhook

from batch.models import BatchJob, WebhookAttempt, WebhookDelivery

from .deployment import ROOT, Deployment, wait_for
from .factories import LOOPBACK, SCRIPTED_BASE, ApiClient
from .private_postgres import PrivatePostgres, postgres_bin, private_postgres
from .receiver import receiver, silent_receiver

pytestmark = pytest.mark.cluster

LINE_ENV = {"SIFT_FETCH_ALLOW_CIDRS": "127.0.0.0/8", "SIFT_WEBHOOK_RETRY_WAIT": "0.2s"}
# Well below the 40 s lease of a claim: an attempt made again within it was given back.
BEFORE_ANY_LEASE_RAN_OUT = 30


@pytest.fixture
def deployment(tmp_path, settings) -> Iterator[Deployment]:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    deployment = Deployment(tmp_path, LINE_ENV)
    yield deployment
    deployment.stop_all()


def _finished_job(client: ApiClient, callback_url: str, query: str = "a=1") -> str:
    """A job finished by a cancel: its webhook is due at once, no cluster needed."""
    response = client.post(
        "/v1/batch", {"targets": [f"{SCRIPTED_BASE}0?{query}"], "callback_url": callback_url}
    )
    assert response.status_code == 202, response.content
    job_id = str(response.json()["id"])
    assert client.delete(f"/v1/batch/{job_id}").status_code == 200
    return job_id


@pytest.mark.django_db(transaction=True)
def test_the_cluster_sends_no_webhook_and_the_webhooks_line_does(deployment: Deployment, agent, tmp_path):
    api_key, client = agent
    deployment.start_cluster()
    with receiver() as hook:
        response = client.post("/v1/batch", {"targets": [f"{SCRIPTED_BASE}0?a=1"], "callback_url": hook.url})
        job_id = response.json()["id"]
        wait_for(lambda: BatchJob.objects.get(pk=job_id).status == "done", 60, "the cluster to run the job")
        time.sleep(3)  # a delivery thread in the cluster would have sent it within a second
        assert hook.posts() == []
        assert WebhookDelivery.objects.get(job_id=job_id).attempt_count == 0
        deployment.start_webhooks()
        post = wait_for(hook.posts, 30, "the webhooks line's POST")[0]
    event = Webhook(api_key.webhook_secret).verify(post.body, post.headers)
    assert (event["data"]["id"], event["data"]["status"]) == (job_id, "done")
    assert "webhook" not in deployment.log("cluster")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_stopping_the_line_mid_attempt_gives_the_attempt_back_to_be_made_again(
    deployment: Deployment, agent, stop_signal
):
    _, client = agent
    with silent_receiver() as dead:
        _finished_job(client, dead.url)
        deployment.start_webhooks()
        wait_for(lambda: dead.open, 30, "the attempt to be in flight")
        line = deployment.processes["webhooks"]
        line.send_signal(stop_signal)
        assert line.wait(20) == 0
        row = WebhookDelivery.objects.get()
        assert (row.attempt_count, row.sending_until, row.state) == (0, None, "sending")
        assert not WebhookAttempt.objects.exists()
        summary = deployment.log("webhooks").strip().splitlines()[-1]
        assert summary.endswith(
            "deliver_webhooks: 0 attempts, 0 delivered, 0 failed, 1 given back unfinished"
        )
        deployment.processes.pop("webhooks")
        deployment.start_webhooks()
        wait_for(lambda: dead.seen >= 2, BEFORE_ANY_LEASE_RAN_OUT, "the attempt to be made again")


@pytest.mark.django_db(transaction=True)
def test_a_stop_with_nothing_in_flight_prints_what_was_done(deployment: Deployment, agent):
    _, client = agent
    with receiver(script=(500,), then=204) as hook:
        _finished_job(client, hook.url)
        deployment.start_webhooks()
        wait_for(lambda: len(hook.posts()) == 2, 30, "the attempt and its retry")
        wait_for(
            lambda: WebhookDelivery.objects.filter(delivered_at__isnull=False).exists(), 30, "the record"
        )
        deployment.stop("webhooks")
    summary = deployment.log("webhooks").strip().splitlines()[-1]
    assert summary.endswith("deliver_webhooks: 2 attempts, 1 delivered, 1 failed, 0 given back unfinished")


# --- a database restart (its own PostgreSQL server, as tests/test_db_restart.py) --------------


@pytest.fixture
def server() -> Iterator[PrivatePostgres]:
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    with private_postgres(bin_dir) as server:
        server.create_database("sift")
        yield server


def _manage(deployment: Deployment, *args: str) -> str:
    command = [sys.executable, "manage.py", *args]
    done = subprocess.run(command, cwd=ROOT, env=deployment.env, check=True, capture_output=True, text=True)
    return done.stdout


def _event_due(deployment: Deployment, url: str, event_id: str) -> None:
    """An event of no job, made due as a later event source will make it."""
    code = (
        "from batch.models import ApiKey; from batch.webhooks import events; "
        f"events.schedule_event(ApiKey.objects.get(), {url!r}, 'monitor.changed', {{}}, "
        f"event_id={event_id!r})"
    )
    _manage(deployment, "shell", "-c", code)


def test_the_line_waits_out_a_database_that_went_away_and_delivers_on(server: PrivatePostgres, tmp_path):
    deployment = Deployment(tmp_path, {**LINE_ENV, "DATABASE_URL": server.url("sift")})
    try:
        _manage(deployment, "migrate", "-v0")
        _manage(deployment, "create_api_key", "restarter")
        deployment.start_webhooks()
        with receiver() as hook:
            _event_due(deployment, hook.url, "msg_before")
            wait_for(hook.posts, 30, "the event before the restart")
            server.stop()
            wait_for(lambda: "database unavailable" in deployment.log("webhooks"), 30, "a round to fail")
            server._ctl("start")
            _event_due(deployment, hook.url, "msg_after")
            wait_for(lambda: len(hook.posts()) == 2, 30, "the event after the restart")
            ids = [post.headers["webhook-id"] for post in hook.posts()]
        assert ids == ["msg_before", "msg_after"]
        assert deployment.processes["webhooks"].poll() is None
        assert "the database answers again" in deployment.log("webhooks")
    finally:
        deployment.stop_all()
