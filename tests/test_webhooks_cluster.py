"""Webhooks of jobs run by a real cluster (``manage.py run_cluster``), sent by the Procfile's
``webhooks`` line (``manage.py deliver_webhooks``) to a receiver on loopback (docs/webhooks.md):
once per finished job, signed, retried with backoff, on a cancel, counted in ``/metrics``, and shared
fairly between callers and receiving hosts when some receivers never answer."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from standardwebhooks import Webhook

from batch.models import ApiKey, BatchJob

from .deployment import Deployment, wait_for
from .factories import LOOPBACK, SCRIPTED_BASE, ApiClient, MakeCaller
from .receiver import receiver, silent_receiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]

CLUSTER_ENV = {
    "SIFT_BATCH_CLAIM_LEASE": "4s",
    "SIFT_BATCH_DRAIN_SECONDS": "20s",
    "SIFT_FETCH_ALLOW_CIDRS": "127.0.0.0/8",
    "SIFT_WEBHOOK_RETRY_WAIT": "0.2s",
}
# Generous beside the 10 s a receiver that never answers holds each attempt.
SOON_AFTER_FINISH = 5.0


@pytest.fixture
def start_cluster(tmp_path, monkeypatch, settings) -> Iterator[Callable[..., Deployment]]:
    """``start_cluster(SIFT_X="...")``: a cluster and the webhooks line on the test database, with
    these settings too."""
    monkeypatch.setenv("SIFT_TEST_FETCH_DIR", str(tmp_path))
    settings.SIFT_BATCH_JOBS_PER_CALLER = 10
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    started: list[Deployment] = []

    def start(**env: str) -> Deployment:
        deployment = Deployment(tmp_path, {**CLUSTER_ENV, **env})
        started.append(deployment)
        deployment.start_cluster()
        deployment.start_webhooks()
        return deployment

    yield start
    for deployment in started:
        deployment.stop_all()


@pytest.fixture
def cluster(start_cluster: Callable[..., Deployment]) -> Deployment:
    return start_cluster()


def _submit(client: ApiClient, callback_url: str, *queries: str) -> str:
    targets = [f"{SCRIPTED_BASE}{i}?{q}" for i, q in enumerate(queries)]
    response = client.post("/v1/batch", {"targets": targets, "callback_url": callback_url})
    assert response.status_code == 202, response.content
    return str(response.json()["id"])


def _event(api_key: ApiKey, post: Any) -> dict[str, Any]:
    event: dict[str, Any] = Webhook(api_key.webhook_secret).verify(post.body, post.headers)
    return event


def test_each_finished_job_posts_once_and_a_failing_receiver_is_retried_with_growing_gaps(
    cluster: Deployment, agent
):
    api_key, client = agent
    with receiver() as steady, receiver(script=(500, 500), then=200) as flaky:
        done = _submit(client, steady.url, "a=1", "b=1")
        failed = _submit(client, steady.url, "fail=timeout")
        retried = _submit(client, flaky.url, "c=1")
        wait_for(lambda: len(steady.posts()) >= 2 and len(flaky.posts()) >= 3, 60, "the webhooks")
        # Delivered means done: nothing more arrives, whatever the cluster does next.
        time.sleep(2)
        steady_posts, flaky_posts = steady.posts(), flaky.posts()
    assert len(steady_posts) == 2
    assert len(flaky_posts) == 3
    by_job = {_event(api_key, p)["data"]["id"]: _event(api_key, p)["data"] for p in steady_posts}
    assert {job_id: data["status"] for job_id, data in by_job.items()} == {done: "done", failed: "failed"}
    assert {_event(api_key, p)["data"]["id"] for p in flaky_posts} == {retried}
    assert flaky_posts[1].at - flaky_posts[0].at >= 0.2
    assert flaky_posts[2].at - flaky_posts[1].at >= 0.4
    shown = client.get(f"/v1/batch/{retried}").json()["webhook"]
    assert [a["status"] for a in shown["attempts"]] == [500, 500, 200]
    assert shown["state"] == "delivered"
    # The webhooks line's counters reach /metrics through the deployment's multiprocess directory.
    cluster.start_web()
    text = cluster.get("/metrics").decode()
    samples = dict(line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("sift_webhook"))
    finished = '{event_type="batch.finished"}'
    counted = {
        name: float(samples[f"sift_webhook_{name}_total{finished}"]) for name in ("deliveries", "failures")
    }
    assert counted == {"deliveries": 3, "failures": 2}
    assert float(samples[f"sift_webhook_retries_total{finished}"]) == 2
    assert (samples["sift_webhook_due"], samples["sift_webhook_undelivered"]) == ("0.0", "0.0")


def test_cancelling_a_running_job_over_the_api_sends_its_webhook(cluster: Deployment, agent, tmp_path):
    api_key, client = agent
    with receiver() as hook:
        job_id = _submit(client, hook.url, "block=1", "a=1")
        wait_for(lambda: BatchJob.objects.get(pk=job_id).status == "running", 60, "the job to run")
        assert client.delete(f"/v1/batch/{job_id}").status_code == 200
        wait_for(hook.posts, 60, "the cancel's webhook")
        (tmp_path / "release").touch()
        time.sleep(2)  # the target in flight finishes; the job stays cancelled, no second webhook
        posts = hook.posts()
    assert len(posts) == 1
    data = _event(api_key, posts[0])["data"]
    assert (data["id"], data["status"]) == (job_id, "cancelled")


# --- sharing the senders (docs/webhooks.md, "Sharing the senders") ---------------------------


def _finished_jobs_posting_to(client: ApiClient, callback_url: str, count: int) -> None:
    """``count`` jobs finished at once by a cancel: each one's webhook is due now."""
    for n in range(count):
        job_id = _submit(client, callback_url, f"n={n}")
        client.delete(f"/v1/batch/{job_id}")


def _seconds_from_finish_to_webhook(job_id: str, post: Any) -> float:
    finished_at = BatchJob.objects.get(pk=job_id).finished_at
    assert finished_at is not None
    return float(post.wall - finished_at.timestamp())


def test_a_key_whose_receiver_never_answers_holds_two_senders_and_delays_no_other_callers_webhook(
    start_cluster: Callable[..., Deployment], make_caller: MakeCaller
):
    start_cluster()
    _, stalling = make_caller("stalling")
    _, other = make_caller("other")
    with silent_receiver() as dead, receiver() as hook:
        _finished_jobs_posting_to(stalling, dead.url, 10)
        wait_for(lambda: dead.open, 30, "the stalling key's first attempts")
        job_id = _submit(other, hook.url, "b=1")
        post = wait_for(hook.posts, 30, "the other caller's webhook")[0]
        # Watch the stalling key through a turnover: its first attempts time out, the next begin.
        wait_for(lambda: dead.seen >= 4, 60, "the stalling key's next attempts")
    assert _seconds_from_finish_to_webhook(job_id, post) < SOON_AFTER_FINISH
    assert dead.most_open == 2  # SIFT_WEBHOOK_PER_CALLER, never more


def test_a_receiving_host_that_never_answers_holds_its_share_of_senders_and_no_more(
    start_cluster: Callable[..., Deployment], make_caller: MakeCaller
):
    # Two keys posting to one dead host would fill all three senders but for the host's share.
    start_cluster(SIFT_WEBHOOK_SENDING="3", SIFT_WEBHOOK_PER_HOST="2")
    _, first = make_caller("first")
    _, second = make_caller("second")
    _, other = make_caller("other")
    with silent_receiver() as dead, receiver(host="127.0.0.2") as hook:
        _finished_jobs_posting_to(first, dead.url, 3)
        _finished_jobs_posting_to(second, dead.url, 3)
        wait_for(lambda: dead.open, 30, "the dead host's first attempts")
        job_id = _submit(other, hook.url, "b=1")
        post = wait_for(hook.posts, 30, "the other host's webhook")[0]
        wait_for(lambda: dead.seen >= 4, 60, "the dead host's next attempts")
    assert _seconds_from_finish_to_webhook(job_id, post) < SOON_AFTER_FINISH
    assert dead.most_open == 2  # SIFT_WEBHOOK_PER_HOST, never more
