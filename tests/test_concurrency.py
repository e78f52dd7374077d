"""64 submits at once never break the caps or the idempotency key (docs/api.md, docs/workers.md).

Run on PostgreSQL (row locks) and on SQLite (IMMEDIATE transactions serialise writers).
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection

from batch import jobs
from batch.engine import worker
from batch.models import ApiKey, BatchJob, BatchTarget, IdempotencyKey
from doors.validation import validate_targets
from fetch.targets import Target

from .factories import N_THREADS, race

URL = "https://example.org/"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("round_", range(3))
def test_one_caller_with_distinct_targets_gets_exactly_its_cap(settings, round_):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 2
    settings.SIFT_BATCH_JOBS_TOTAL = 100
    caller, _ = ApiKey.issue(f"racer{round_}")
    answers = race(
        [lambda i=i: jobs.submit(caller, validate_targets([f"{URL}?{i}"])) for i in range(N_THREADS)]
    )
    counts = Counter(a.split(":")[0] for a in answers)
    assert counts == {"new": 2, "caller_busy": N_THREADS - 2}
    assert BatchJob.objects.filter(caller=caller).count() == 2


@pytest.mark.parametrize("round_", range(3))
def test_one_caller_with_identical_targets_gets_one_job_and_every_answer_carries_its_id(settings, round_):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    caller, _ = ApiKey.issue(f"twin{round_}")
    answers = race([lambda: jobs.submit(caller, validate_targets([URL])) for _ in range(N_THREADS)])
    job = BatchJob.objects.get(caller=caller)
    assert sorted(answers) == [f"new:{job.id}"] + [f"reused:{job.id}"] * (N_THREADS - 1)


@pytest.mark.parametrize("round_", range(3))
def test_many_callers_at_once_get_exactly_the_total_cap(settings, round_):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    settings.SIFT_BATCH_JOBS_TOTAL = 8
    callers = [ApiKey.issue(f"crowd{round_}-{i}")[0] for i in range(N_THREADS)]
    answers = race([lambda c=c: jobs.submit(c, validate_targets([URL])) for c in callers])
    counts = Counter(a.split(":")[0] for a in answers)
    assert counts == {"new": 8, "jobs_busy": N_THREADS - 8}
    assert BatchJob.objects.count() == 8


@pytest.mark.parametrize("round_", range(3))
def test_many_callers_with_room_for_most_of_them_get_exactly_the_cap(settings, round_):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    settings.SIFT_BATCH_JOBS_TOTAL = 40
    callers = [ApiKey.issue(f"most{round_}-{i}")[0] for i in range(N_THREADS)]
    answers = race([lambda c=c: jobs.submit(c, validate_targets([URL])) for c in callers])
    counts = Counter(a.split(":")[0] for a in answers)
    assert counts == {"new": 40, "jobs_busy": N_THREADS - 40}
    assert BatchJob.objects.count() == 40


@pytest.mark.parametrize("round_", range(3))
def test_many_callers_far_below_the_total_cap_all_get_a_job(settings, round_):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    settings.SIFT_BATCH_JOBS_TOTAL = 1000
    callers = [ApiKey.issue(f"far{round_}-{i}")[0] for i in range(N_THREADS)]
    answers = race([lambda c=c: jobs.submit(c, validate_targets([URL])) for c in callers])
    assert Counter(a.split(":")[0] for a in answers) == {"new": N_THREADS}
    assert BatchJob.objects.count() == N_THREADS


# --- the Idempotency-Key header under concurrent retries ------------------------------------


@pytest.mark.parametrize("round_", range(3))
def test_retries_with_one_idempotency_key_get_one_job(settings, round_):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 100
    caller, _ = ApiKey.issue(f"retrier{round_}")
    answers = race(
        [
            lambda: jobs.submit(caller, validate_targets([URL]), idempotency_key="one-key")
            for _ in range(N_THREADS)
        ]
    )
    job = BatchJob.objects.get(caller=caller)
    assert sorted(answers) == [f"new:{job.id}"] + [f"reused:{job.id}"] * (N_THREADS - 1)
    assert IdempotencyKey.objects.filter(caller=caller).count() == 1


@pytest.mark.parametrize("round_", range(3))
def test_different_requests_with_one_idempotency_key_get_one_job_and_422s(settings, round_):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 100
    caller, _ = ApiKey.issue(f"mixer{round_}")
    answers = race(
        [
            lambda i=i: jobs.submit(caller, validate_targets([f"{URL}?{i}"]), idempotency_key="one-key")
            for i in range(N_THREADS)
        ]
    )
    counts = Counter(a.split(":")[0] for a in answers)
    assert counts == {"new": 1, "idempotency_key_reused": N_THREADS - 1}
    assert BatchJob.objects.filter(caller=caller).count() == 1


# --- reuse while a worker settles the twin (issue 9, point 13) ------------------------------

on_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="row-lock deadlocks only exist on PostgreSQL"
)


def _instant(caller: worker.Caller, target: Target) -> worker.Result:
    return {"content": "x", "meta": {}}


def _settle_again_and_again(job_id: str, stop: threading.Event, errors: list[str]) -> int:
    """The worker's own claim and finish transactions on one job, reopened after each settle."""
    rounds = 0
    try:
        while not stop.is_set():
            BatchJob.objects.filter(pk=job_id).update(
                status="running", targets_done=0, targets_failed=0, finished_at=None, n_bytes=0
            )
            BatchTarget.objects.filter(job_id=job_id).update(
                status="pending", result=None, n_bytes=0, finished_at=None, lease_until=None
            )
            claim = worker.claim_next_target()
            if claim is not None:
                worker.run_claim(claim, _instant)
                rounds += 1
    except Exception as exc:
        errors.append(f"worker: {exc!r}")
    finally:
        connection.close()
    return rounds


@on_postgres
@pytest.mark.postgres
@pytest.mark.parametrize("round_", range(2))
def test_identical_submits_while_a_worker_settles_the_twin_never_deadlock(settings, round_):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    caller, _ = ApiKey.issue(f"settler{round_}")
    twin = jobs.submit(caller, validate_targets([URL])).job
    stop = threading.Event()
    errors: list[str] = []
    settler = threading.Thread(target=_settle_again_and_again, args=(twin.pk, stop, errors))
    settler.start()
    answers: list[str] = []
    try:
        for _ in range(5):
            answers += race([lambda: jobs.submit(caller, validate_targets([URL])) for _ in range(32)])
    finally:
        stop.set()
        settler.join()
    assert errors == []
    assert Counter(answers) == {f"reused:{twin.pk}": 5 * 32}
    assert BatchJob.objects.filter(caller=caller).count() == 1
