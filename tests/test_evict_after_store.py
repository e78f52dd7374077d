"""The byte budget after a worker's store: checked when a job ends, and once a share of it is stored.

A store does not sum every job's bytes after each target (``retention.evict_after_store``): the
budget is checked when a job ends and, while jobs run, once a worker process has stored
``1/CHECK_SHARE`` of it since its last check.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from batch import jobs, retention
from batch.engine import storable, worker
from batch.models import BatchJob
from capacity import eviction
from doors.validation import validate_targets
from fetch.targets import Target

from .factories import make_job

URL = "https://example.org/"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
BUDGET = 64_000
SHARE = BUDGET // eviction.CHECK_SHARE  # 1000 bytes


@pytest.fixture(autouse=True)
def budget(settings, monkeypatch):
    settings.SIFT_BATCH_MAX_BYTES = BUDGET
    settings.SIFT_BATCH_WORKERS = 1
    settings.SIFT_BATCH_JOBS_PER_CALLER = 10
    # What earlier tests stored in this process must not make a check due here.
    monkeypatch.setattr(retention, "UNCHECKED_BYTES", eviction.UncheckedBytes())


def _result_of(n_bytes: int) -> worker.Result:
    result: worker.Result = {"content": "", "meta": {}}
    result["content"] = "x" * (n_bytes - storable.json_bytes(result))
    assert storable.json_bytes(result) == n_bytes
    return result


def _fetch_results_of(n_bytes: int) -> worker.FetchFunc:
    def fetch(caller: worker.Caller, target: Target) -> worker.Result:
        return _result_of(n_bytes)

    return fetch


def _finished_job(caller, *, n_bytes: int, minutes: int) -> BatchJob:
    target = {"url": URL, "status": "done", "result": {"content": "x", "meta": {}}}
    at = T0 + timedelta(minutes=minutes)
    return make_job(
        caller, "done", targets=[target], created_at=at, last_read_at=timezone.now(), n_bytes=n_bytes
    )


def _run_one(fetch: worker.FetchFunc) -> None:
    claim = worker.claim_next_target()
    assert claim is not None
    worker.run_claim(claim, fetch)


def test_a_job_ending_checks_the_budget_even_when_it_stored_less_than_a_share(agent):
    caller, _ = agent
    oldest = _finished_job(caller, n_bytes=32_000, minutes=1)
    newer = _finished_job(caller, n_bytes=31_800, minutes=2)
    job = jobs.submit(caller, validate_targets([URL + "a", URL + "b"])).job
    fetch = _fetch_results_of(300)
    _run_one(fetch)
    # 64,100 bytes stored, 300 of them unchecked: within the share, nothing is evicted yet.
    assert BatchJob.objects.filter(pk=oldest.pk).exists()
    _run_one(fetch)
    job.refresh_from_db()
    assert job.status == "done"
    assert not BatchJob.objects.filter(pk=oldest.pk).exists()
    assert set(BatchJob.objects.values_list("pk", flat=True)) == {newer.pk, job.pk}


def test_a_running_job_storing_a_share_of_the_budget_evicts_before_it_ends(agent):
    caller, _ = agent
    oldest = _finished_job(caller, n_bytes=63_500, minutes=1)
    job = jobs.submit(caller, validate_targets([URL + "a", URL + "b", URL + "c"])).job
    fetch = _fetch_results_of(SHARE // 2 + 100)
    _run_one(fetch)
    assert BatchJob.objects.filter(pk=oldest.pk).exists()
    _run_one(fetch)  # the worker has now stored more than a share since it last checked
    job.refresh_from_db()
    assert job.is_live
    assert not BatchJob.objects.filter(pk=oldest.pk).exists()
    assert job.n_bytes == 2 * (SHARE // 2 + 100) <= BUDGET
