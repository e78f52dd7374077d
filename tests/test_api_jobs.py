"""Reading, listing and cancelling jobs over the API (docs/api.md)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from batch import jobs
from batch.models import BatchJob, BatchTarget

from .factories import done_target, failed_target, make_job, submit

URL = "https://example.org/"


TARGETS = [URL, URL + "b"]


def _finish_first_target(job_id: str) -> None:
    BatchTarget.objects.filter(job_id=job_id, idx=0).update(
        status="done", result={"content": "# Hello", "meta": {"title": "Hello", "chars": 7}}, n_bytes=7
    )


def test_get_job_returns_every_summary_field_and_its_targets(agent):
    _, client = agent
    job = submit(client, TARGETS)
    body = client.get(f"/v1/batch/{job['id']}").json()
    assert set(body) == {
        "id", "caller", "caller_class", "status", "error", "targets_total", "targets_done",
        "targets_failed", "created_at", "finished_at", "last_read_at", "expires_at", "n_bytes", "targets",
        "wait_cut_short", "callback_url", "webhook",
    }  # fmt: skip
    assert body["caller"] == "agent"
    assert [t["idx"] for t in body["targets"]] == [0, 1]
    assert set(body["targets"][0]) >= {
        "idx",
        "url",
        "status",
        "result",
        "error",
        "hint",
        "outcome",
        "attempts",
    }
    assert body["created_at"].endswith("Z")


def test_content_false_leaves_the_content_out_and_keeps_meta(agent):
    _, client = agent
    job = submit(client, TARGETS)
    _finish_first_target(job["id"])
    full = client.get(f"/v1/batch/{job['id']}").json()["targets"][0]["result"]
    slim = client.get(f"/v1/batch/{job['id']}", content="false").json()["targets"][0]["result"]
    assert full == {"content": "# Hello", "meta": {"title": "Hello", "chars": 7}}
    assert slim == {"meta": {"title": "Hello", "chars": 7}}


def test_one_target_is_served_with_its_full_result(agent):
    _, client = agent
    job = submit(client, TARGETS)
    _finish_first_target(job["id"])
    body = client.get(f"/v1/batch/{job['id']}/targets/0").json()
    assert body["result"]["content"] == "# Hello"
    assert client.get(f"/v1/batch/{job['id']}/targets/7").status_code == 404


def test_wait_returns_at_once_for_a_finished_job(agent):
    _, client = agent
    job = submit(client, TARGETS)
    client.delete(f"/v1/batch/{job['id']}")
    response = client.get(f"/v1/batch/{job['id']}", wait=60)
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"


def test_wait_gives_up_after_the_seconds_asked_and_answers_the_live_job(agent):
    _, client = agent
    job = submit(client, TARGETS)
    started = time.monotonic()
    response = client.get(f"/v1/batch/{job['id']}", wait=1)
    assert response.json()["status"] == "queued"
    assert time.monotonic() - started >= 1


def test_wait_out_of_range_is_400(agent):
    _, client = agent
    job = submit(client, TARGETS)
    response = client.get(f"/v1/batch/{job['id']}", wait=61)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


def test_cancel_a_queued_job_answers_cancelled_and_leaves_targets_pending(agent):
    _, client = agent
    job = submit(client, TARGETS)
    response = client.delete(f"/v1/batch/{job['id']}")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert response.json()["finished_at"] is not None
    stored = BatchJob.objects.get(pk=job["id"])
    assert stored.status == "cancelled"
    assert set(stored.targets.values_list("status", flat=True)) == {"pending"}


def test_cancel_again_is_409_already_finished(agent):
    _, client = agent
    job = submit(client, TARGETS)
    client.delete(f"/v1/batch/{job['id']}")
    response = client.delete(f"/v1/batch/{job['id']}")
    assert response.status_code == 409
    assert response.json()["code"] == "already_finished"


def test_cancel_a_done_job_is_409(agent):
    _, client = agent
    job = submit(client, TARGETS)
    BatchJob.objects.filter(pk=job["id"]).update(status="done", finished_at=timezone.now())
    assert client.delete(f"/v1/batch/{job['id']}").status_code == 409


def test_list_is_newest_first_and_paginated(agent, settings):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 5
    _, client = agent
    ids = [submit(client, [f"{URL}?{i}"])["id"] for i in range(3)]
    page = client.get("/v1/batch", limit=2).json()
    assert page["count"] == 3
    assert [j["id"] for j in page["items"]] == ids[::-1][:2]
    assert [j["id"] for j in client.get("/v1/batch", limit=2, offset=2).json()["items"]] == ids[:1]
    assert client.get("/v1/batch", limit=0).status_code == 400
    assert client.get("/v1/batch", limit="many").json()["code"] == "invalid_request"


# --- a job too large to answer whole ---------------------------------------------------------


def _read_bytes(client, path: str, **params) -> tuple[Any, bytes]:
    response = client.get(path, **params)
    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response, body


def test_a_job_too_large_to_hold_is_answered_in_pieces_with_the_same_json_as_whole(agent, monkeypatch):
    caller, client = agent
    targets = [done_target(f"# Page {n}\n" + "text " * 300, n_bytes=2000) for n in range(5)]
    targets.insert(2, failed_target())
    job = make_job(
        caller, "partial", targets=targets, n_bytes=10_000, callback_url="https://example.org/hook"
    )
    path = f"/v1/batch/{job.id}"
    with time_machine.travel(timezone.now(), tick=False):
        whole_response, whole = _read_bytes(client, path)
        monkeypatch.setattr(jobs, "PIECE_BYTES", 3000)  # a piece holds one target here
        pieces_response, pieces = _read_bytes(client, path)
        _, without_content = _read_bytes(client, path, content="false")
    assert not whole_response.streaming
    assert pieces_response.streaming
    assert pieces_response["Content-Type"] == whole_response["Content-Type"]
    assert pieces == whole
    body = json.loads(pieces)
    assert [t["idx"] for t in body["targets"]] == list(range(6))
    assert (body["status"], body["wait_cut_short"]) == ("partial", False)
    assert all("content" not in (t["result"] or {}) for t in json.loads(without_content)["targets"])


@pytest.mark.django_db(transaction=True)  # closing a streamed answer closes the connection
def test_a_caller_reads_at_most_its_share_of_large_jobs_at_once_and_others_are_not_refused(
    make_caller, monkeypatch, settings
):
    settings.SIFT_BATCH_READS_PER_CALLER = 1
    monkeypatch.setattr(jobs, "PIECE_BYTES", 100)
    caller, client = make_caller("reader")
    other, other_client = make_caller("other")
    job = make_job(caller, "done", targets=[done_target(), done_target()], n_bytes=4096)
    theirs = make_job(other, "done", targets=[done_target(), done_target()], n_bytes=4096)
    held = client.get(f"/v1/batch/{job.id}")  # its answer not read yet: it holds the share
    assert held.streaming
    refused = client.get(f"/v1/batch/{job.id}")
    body = refused.json()
    assert (refused.status_code, body["code"]) == (429, "caller_busy")
    assert refused["Retry-After"] == str(body["retry_after"])
    assert other_client.get(f"/v1/batch/{theirs.id}").status_code == 200
    held.close()  # as the server does once an answer is sent, or its client has gone
    again = client.get(f"/v1/batch/{job.id}")
    assert again.status_code == 200
    again.close()
