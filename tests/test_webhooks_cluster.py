"""Webhooks sent by a real cluster (``manage.py run_cluster``) to a receiver on loopback
(docs/webhooks.md): once per finished job, signed, retried with backoff, and on a cancel."""

from __future__ import annotations

import time
from typing import Any

import pytest
from standardwebhooks import Webhook

from batch.models import ApiKey, BatchJob

from .deployment import Deployment, wait_for
from .factories import LOOPBACK, SCRIPTED_BASE, ApiClient
from .receiver import receiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]


@pytest.fixture
def cluster(tmp_path, monkeypatch, settings):
    monkeypatch.setenv("SIFT_TEST_FETCH_DIR", str(tmp_path))
    settings.SIFT_BATCH_JOBS_PER_CALLER = 10
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    deployment = Deployment(
        tmp_path,
        {
            "SIFT_BATCH_CLAIM_LEASE": "4s",
            "SIFT_BATCH_DRAIN_SECONDS": "20s",
            "SIFT_FETCH_ALLOW_CIDRS": "127.0.0.1/32",
            "SIFT_WEBHOOK_RETRY_WAIT": "0.2s",
        },
    )
    deployment.start_cluster()
    yield deployment
    deployment.stop_all()


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
