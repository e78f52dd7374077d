"""``GET /v1/batch/{id}/events`` refusals, in process (the stream itself: tests/test_batch_events.py)."""

from __future__ import annotations

import pytest

from batch import streams

from .factories import MakeCaller, make_job

pytestmark = pytest.mark.django_db(transaction=True)  # the view reads in threads of its own


def test_one_stream_beyond_the_total_is_busy_with_retry_after_even_for_a_caller_holding_none(
    make_caller: MakeCaller, settings
):
    settings.SIFT_BATCH_STREAMS_TOTAL = 1
    hog, _ = make_caller("hog")
    caller, client = make_caller("polite")
    job = make_job(caller, "queued")
    assert streams.STREAMS.take(hog.pk)
    try:
        response = client.get(f"/v1/batch/{job.id}/events")
    finally:
        streams.STREAMS.give_back(hog.pk)
    body = response.json()
    assert (response.status_code, body["code"]) == (429, "busy")
    assert response["Retry-After"] == str(body["retry_after"])
    assert "Retry-After" in body["hint"]


def test_with_batches_disabled_the_stream_answers_batch_disabled(agent, settings):
    settings.SIFT_BATCH_ENABLED = False
    caller, client = agent
    job = make_job(caller, "queued")
    response = client.get(f"/v1/batch/{job.id}/events")
    assert (response.status_code, response.json()["code"]) == (503, "batch_disabled")


def test_a_malformed_job_id_is_invalid_and_an_unknown_one_not_found_without_taking_a_share(agent, settings):
    settings.SIFT_BATCH_STREAMS_PER_CALLER = 1
    _, client = agent
    malformed = client.get("/v1/batch/nope/events")
    assert (malformed.status_code, malformed.json()["code"]) == (400, "invalid_request")
    response = client.get(f"/v1/batch/{'0' * 32}/events")
    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    caller = agent[0]
    assert streams.STREAMS.take(caller.pk)  # the refusals took no share
    streams.STREAMS.give_back(caller.pk)
