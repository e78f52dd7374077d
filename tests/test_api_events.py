"""``GET /v1/batch/{id}/events`` refusals, in process (the stream itself: tests/test_batch_events.py;
the bounds across web processes: tests/test_stream_bounds.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.http import StreamingHttpResponse
from django.utils import timezone

from batch.models import BatchJob, EventStream
from doors import stream_bounds, streams

from .deployment import wait_for
from .factories import MakeCaller, make_job

pytestmark = pytest.mark.django_db(transaction=True)  # the view reads in threads of its own


def test_one_stream_beyond_the_total_is_busy_with_retry_after_even_for_a_caller_holding_none(
    make_caller: MakeCaller, settings
):
    settings.SIFT_BATCH_STREAMS_TOTAL = 1
    hog, _ = make_caller("hog")
    caller, client = make_caller("polite")
    job = make_job(caller, "queued")
    assert stream_bounds.admit(hog, make_job(hog, "queued").id) is not None
    response = client.get(f"/v1/batch/{job.id}/events")
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
    assert not EventStream.objects.exists()  # the refusals took no share


@pytest.mark.parametrize(
    "last_event_id",
    ["x", "-1", "²", "1.5", str(2**63), str(2**70), "9" * 5000],
    ids=["letter", "negative", "superscript", "decimal", "2^63", "2^70", "5000-digits"],
)
def test_a_last_event_id_that_is_no_event_id_is_400_with_a_hint(agent, last_event_id):
    caller, client = agent
    job = make_job(caller, "done")
    response = client.client.get(
        f"/v1/batch/{job.id}/events", headers={**client.headers, "Last-Event-ID": last_event_id}
    )
    body = response.json()
    assert (response.status_code, body["code"]) == (400, "invalid_request")
    assert "Last-Event-ID" in body["error"]
    assert "whole number" in body["hint"]
    assert not EventStream.objects.exists()


def test_a_finished_jobs_stream_deletes_its_row_when_it_ends(agent, settings):
    settings.SIFT_BATCH_STREAMS_PER_CALLER = 1
    caller, client = agent
    job = make_job(caller, "done")
    for _ in range(2):  # the second stream is admitted once the first one's row is gone
        response = client.get(f"/v1/batch/{job.id}/events")
        assert response.status_code == 200
        assert b"event: job" in async_to_sync(_read_all)(response)
        wait_for(lambda: not EventStream.objects.exists(), timeout=5, what="the stream's row to go")


async def _read_all(response: StreamingHttpResponse) -> bytes:
    return b"".join([part async for part in response.streaming_content])  # type: ignore[union-attr]


def test_admission_counts_live_rows_only_and_drops_the_dead(make_caller: MakeCaller, settings):
    settings.SIFT_BATCH_STREAMS_PER_CALLER = 2
    settings.SIFT_BATCH_STREAMS_TOTAL = 3
    caller, _ = make_caller("agent")
    other, _ = make_caller("other")
    job_id = make_job(caller, "queued").id
    first = stream_bounds.admit(caller, job_id)
    assert first is not None
    assert stream_bounds.admit(caller, job_id) is not None
    assert stream_bounds.admit(caller, job_id) is None  # the caller's two
    assert stream_bounds.admit(other, job_id) is not None
    assert stream_bounds.admit(other, job_id) is None  # three in all
    # A process that died left the first row: once its lease ran out, it no longer counts.
    EventStream.objects.filter(pk=first).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert stream_bounds.admit(caller, job_id) is not None
    assert not EventStream.objects.filter(pk=first).exists()
    assert EventStream.objects.count() == 3
    stream_bounds.close(first)  # closing a row already gone is nothing
    assert stream_bounds.renew(list(EventStream.objects.values_list("pk", flat=True))) == 3


def test_a_streams_query_hands_its_connection_back_so_no_idle_thread_holds_one():
    # Kept open in an idle thread, a connection would hold the database (the test database at its
    # teardown too); under ASGI on PostgreSQL the same close hands it back to the pool.
    assert streams._query(BatchJob.objects.count) == 0
    assert connection.connection is None
