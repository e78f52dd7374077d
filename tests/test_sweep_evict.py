"""Lease, TTL, sweep and eviction, through the API and the commands."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.utils import timezone

from batch import jobs, retention
from batch.models import BatchJob, BatchTarget
from doors.validation import validate_targets

from .factories import done_target, make_job, submit

URL = "https://example.org/"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def day_ttl(settings):
    settings.SIFT_BATCH_TTL = 24 * 3600
    settings.SIFT_BATCH_JOBS_PER_CALLER = 10


def test_a_job_past_its_ttl_is_gone_after_the_next_submit(agent, day_ttl):
    _, client = agent
    with time_machine.travel(T0, tick=False):
        old = submit(client, [URL])["id"]
    with time_machine.travel(T0 + timedelta(hours=25), tick=False):
        client.post("/v1/batch", {"targets": [URL + "new"]})
    assert not BatchJob.objects.filter(pk=old).exists()
    assert not BatchTarget.objects.filter(job_id=old).exists()
    assert BatchJob.objects.count() == 1


def test_an_owners_read_moves_last_read_at_and_keeps_the_job_alive(agent, day_ttl):
    _, client = agent
    with time_machine.travel(T0, tick=False):
        job_id = submit(client, [URL])["id"]
    with time_machine.travel(T0 + timedelta(hours=20), tick=False):
        body = client.get(f"/v1/batch/{job_id}").json()
        assert body["expires_at"] == (T0 + timedelta(hours=44)).isoformat().replace("+00:00", "Z")
    with time_machine.travel(T0 + timedelta(hours=30), tick=False):
        client.post("/v1/batch", {"targets": [URL + "other"]})
        assert BatchJob.objects.filter(pk=job_id).exists()
    with time_machine.travel(T0 + timedelta(hours=45), tick=False):
        client.post("/v1/batch", {"targets": [URL + "third"]})
        assert not BatchJob.objects.filter(pk=job_id).exists()


def test_an_expired_live_job_no_longer_holds_the_callers_cap(agent, settings):
    settings.SIFT_BATCH_TTL = 3600
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    _, client = agent
    with time_machine.travel(T0, tick=False):
        client.post("/v1/batch", {"targets": [URL]})
    with time_machine.travel(T0 + timedelta(hours=2), tick=False):
        assert client.post("/v1/batch", {"targets": [URL + "new"]}).status_code == 202


def test_sweep_batches_removes_expired_jobs_and_prints_counts(agent, day_ttl):
    _, client = agent
    with time_machine.travel(T0, tick=False):
        client.post("/v1/batch", {"targets": [URL, URL + "2"]})
    with time_machine.travel(T0 + timedelta(hours=1), tick=False):
        fresh = submit(client, [URL + "fresh"])["id"]
    BatchJob.objects.update(n_bytes=0)
    out = StringIO()
    with time_machine.travel(T0 + timedelta(hours=24, minutes=30), tick=False):
        call_command("sweep_batches", stdout=out)
    assert out.getvalue().strip() == "sweep: removed 1 jobs, 2 targets, 0 bytes"
    assert list(BatchJob.objects.values_list("pk", flat=True)) == [fresh]


def _finished_job(caller, *, n_bytes: int, minutes: int, status: str = "done") -> BatchJob:
    target = {"url": URL, "status": "done", "result": {"content": "x", "meta": {}}}
    at = T0 + timedelta(minutes=minutes)
    return make_job(
        caller, status, targets=[target], created_at=at, last_read_at=timezone.now(), n_bytes=n_bytes
    )


def _live_job(caller, *, n_bytes: int, minutes: int) -> BatchJob:
    at = T0 + timedelta(minutes=minutes)
    return make_job(
        caller, "running", targets=[], created_at=at, last_read_at=timezone.now(), n_bytes=n_bytes,
        targets_total=2, targets_done=1,
    )  # fmt: skip


def test_evict_removes_the_oldest_finished_jobs_first_until_they_fit(agent):
    caller, _ = agent
    oldest = _finished_job(caller, n_bytes=400, minutes=1)
    live = _live_job(caller, n_bytes=500, minutes=0)
    middle = _finished_job(caller, n_bytes=300, minutes=2, status="partial")
    newest = _finished_job(caller, n_bytes=200, minutes=3)
    removed = retention.evict_oldest(max_bytes=800)
    assert removed == retention.Removed(jobs=2, targets=2, bytes=700)
    assert set(BatchJob.objects.values_list("pk", flat=True)) == {live.pk, newest.pk}
    assert not BatchJob.objects.filter(pk__in=[oldest.pk, middle.pk]).exists()


def test_evict_never_removes_live_jobs_even_when_they_alone_are_over(agent):
    caller, _ = agent
    live = _live_job(caller, n_bytes=5000, minutes=0)
    done = _finished_job(caller, n_bytes=10, minutes=1)
    assert retention.evict_oldest(max_bytes=100) == retention.Removed(jobs=1, targets=1, bytes=10)
    assert list(BatchJob.objects.values_list("pk", flat=True)) == [live.pk]
    assert not BatchJob.objects.filter(pk=done.pk).exists()


def test_evict_within_budget_removes_nothing(agent):
    caller, _ = agent
    _finished_job(caller, n_bytes=10, minutes=1)
    assert retention.evict_oldest(max_bytes=10) == retention.Removed()


def test_evict_batches_command_prints_counts(agent):
    caller, _ = agent
    _finished_job(caller, n_bytes=300, minutes=1)
    _finished_job(caller, n_bytes=300, minutes=2)
    out = StringIO()
    call_command("evict_batches", "--max-bytes", "400", stdout=out)
    assert out.getvalue().strip() == "evict: removed 1 jobs, 1 targets, 300 bytes"
    assert BatchJob.objects.count() == 1


def test_evict_batches_refuses_a_negative_budget(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="max-bytes"):
        call_command("evict_batches", "--max-bytes", "-1")


# --- finished jobs per caller (issue 9, point 12) -------------------------------------------


@pytest.fixture
def keep_three(settings, monkeypatch, tmp_path):
    settings.SIFT_BATCH_FINISHED_PER_CALLER = 3
    settings.SIFT_BATCH_JOBS_PER_CALLER = 10
    settings.SIFT_BATCH_WORKERS = 1
    monkeypatch.setenv("SIFT_TEST_FETCH_DIR", str(tmp_path))


def _finish_one_job_through_the_worker(caller, url: str) -> BatchJob:
    from batch.engine import worker

    from . import fetchers

    job = jobs.submit(caller, validate_targets([url])).job
    assert worker.drain(fetchers.scripted, budget=30) == 1
    job.refresh_from_db()
    assert not job.is_live
    return job


def test_a_finished_job_evicts_its_callers_oldest_finished_jobs_beyond_the_count(
    agent, make_caller, keep_three
):
    caller, client = agent
    other, _ = make_caller("other")
    old = [_finished_job(caller, n_bytes=0, minutes=m, status="failed") for m in range(1, 6)]
    others = [_finished_job(other, n_bytes=0, minutes=m, status="failed") for m in range(1, 6)]
    live = _live_job(caller, n_bytes=0, minutes=0)
    # Listing moves every job's last_read_at; it must not keep jobs beyond the count alive.
    assert client.get("/v1/batch", limit=100).status_code == 200
    newest = _finish_one_job_through_the_worker(caller, URL + "?fail=timeout")
    kept = set(BatchJob.objects.filter(caller=caller).values_list("pk", flat=True))
    assert kept == {newest.pk, old[4].pk, old[3].pk, live.pk}
    assert not BatchTarget.objects.filter(job_id__in=[j.pk for j in old[:3]]).exists()
    assert BatchJob.objects.filter(caller=other).count() == len(others)


def test_live_jobs_never_count_and_are_never_evicted(agent, keep_three):
    caller, _ = agent
    live = [_live_job(caller, n_bytes=0, minutes=m) for m in range(5)]
    finished = [_finished_job(caller, n_bytes=0, minutes=10 + m) for m in range(3)]
    assert retention.evict_callers_oldest(caller.pk) == retention.Removed()
    assert BatchJob.objects.count() == len(live) + len(finished)


def test_a_cancel_evicts_the_callers_oldest_finished_jobs_too(agent, keep_three):
    caller, client = agent
    old = [_finished_job(caller, n_bytes=10, minutes=m, status="cancelled") for m in range(1, 5)]
    job_id = submit(client, [URL + "cancel-me"])["id"]
    assert client.delete(f"/v1/batch/{job_id}").status_code == 200
    kept = set(BatchJob.objects.filter(caller=caller).values_list("pk", flat=True))
    assert kept == {job_id, old[3].pk, old[2].pk}


def test_evict_batches_removes_every_callers_excess_and_prints_it(agent, make_caller, keep_three):
    caller, _ = agent
    other, _ = make_caller("other")
    for m in range(1, 6):
        _finished_job(caller, n_bytes=100, minutes=m)
    for m in range(1, 4):
        _finished_job(other, n_bytes=100, minutes=m)
    out = StringIO()
    call_command("evict_batches", stdout=out)
    assert out.getvalue().strip() == "evict: removed 2 jobs, 2 targets, 200 bytes"
    assert BatchJob.objects.filter(caller=caller).count() == 3
    assert BatchJob.objects.filter(caller=other).count() == 3


# --- the byte budget's fair turns ------------------------------------------------------------


def _unread_job(caller, *, n_bytes: int, minutes: int) -> BatchJob:
    """A job submitted a minute before it finished at T0 + ``minutes``, and not read since."""
    at = T0 + timedelta(minutes=minutes)
    return make_job(
        caller, "done", targets=[done_target()], created_at=at - timedelta(minutes=1), finished_at=at,
        n_bytes=n_bytes,
    )  # fmt: skip


def test_one_callers_big_jobs_never_evict_another_callers_unread_result(make_caller):
    polite, polite_client = make_caller("polite")
    hog, _ = make_caller("hog")
    unread = _unread_job(polite, n_bytes=100, minutes=0)  # the oldest of all
    older_hog = _finished_job(hog, n_bytes=500, minutes=1)
    newer_hog = _finished_job(hog, n_bytes=500, minutes=2)
    removed = retention.evict_oldest(max_bytes=800)
    assert removed == retention.Removed(jobs=1, targets=1, bytes=500)
    assert set(BatchJob.objects.values_list("pk", flat=True)) == {unread.pk, newer_hog.pk}
    assert not BatchJob.objects.filter(pk=older_hog.pk).exists()
    response = polite_client.get(f"/v1/batch/{unread.pk}")
    assert (response.status_code, response.json()["status"]) == (200, "done")


def test_callers_over_their_share_lose_their_oldest_first_then_read_jobs_then_unread_ones(make_caller):
    first, _ = make_caller("first")
    second, _ = make_caller("second")
    third, _ = make_caller("third")
    # The budget of 900 gives each of the three callers holding finished jobs 300.
    first_unread = _unread_job(first, n_bytes=200, minutes=0)
    second_read = _finished_job(second, n_bytes=200, minutes=1)
    third_old = _finished_job(third, n_bytes=250, minutes=2)
    third_live = _live_job(third, n_bytes=100, minutes=3)  # counts in its caller's bytes, never goes
    third_new = _finished_job(third, n_bytes=250, minutes=4)
    order = list(retention.eviction_order(900).values_list("pk", flat=True))
    assert order == [third_old.pk, third_new.pk, second_read.pk, first_unread.pk]
    # 1000 stored: the over-share caller's oldest job alone brings them within the budget.
    assert retention.evict_oldest(max_bytes=900) == retention.Removed(jobs=1, targets=1, bytes=250)
    assert set(BatchJob.objects.values_list("pk", flat=True)) == {
        first_unread.pk, second_read.pk, third_live.pk, third_new.pk,
    }  # fmt: skip


def test_within_their_shares_a_job_its_owner_read_goes_before_an_older_unread_one(make_caller):
    reader, _ = make_caller("reader")
    away, _ = make_caller("away")
    busy, _ = make_caller("busy")
    unread = _unread_job(away, n_bytes=200, minutes=0)
    read = _finished_job(reader, n_bytes=200, minutes=1)
    _live_job(busy, n_bytes=300, minutes=2)  # holds no finished job: the share is 600 / 2
    assert retention.evict_oldest(max_bytes=600) == retention.Removed(jobs=1, targets=1, bytes=200)
    assert not BatchJob.objects.filter(pk=read.pk).exists()
    assert BatchJob.objects.filter(pk=unread.pk).exists()
