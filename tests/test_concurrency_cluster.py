"""The submit races of ``test_concurrency.py`` again, while a real qcluster works for the same caller.

A worker's commit checks its job's foreign key to the caller row (FOR KEY SHARE) while a submit
holds that row locked and waits to touch the job: with the wrong lock strength this deadlocks on
PostgreSQL and a submit answers 500. Here the cluster settles and serves the caller's jobs
during every race; no answer may be an error, and exactly the allowed jobs are created.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from django.db import connection

from batch import jobs
from batch.models import ApiKey, BatchJob
from doors.validation import validate_targets

from .deployment import Deployment, wait_for
from .factories import N_THREADS, SCRIPTED_BASE, race

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.cluster,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="row-lock deadlocks only exist on PostgreSQL"
    ),
]

BASE = SCRIPTED_BASE
# Jobs created by a race must not finish while it runs, or a cap would free up mid-race.
SLOW = "sleep=10"


@pytest.fixture
def cluster(tmp_path, monkeypatch) -> Iterator[Deployment]:
    monkeypatch.setenv("SIFT_TEST_FETCH_DIR", str(tmp_path))
    deployment = Deployment(
        tmp_path,
        {"SIFT_BATCH_WORKERS": "2", "SIFT_BATCH_CLAIM_LEASE": "30s", "SIFT_BATCH_DRAIN_SECONDS": "20s"},
    )
    deployment.start_cluster()
    yield deployment
    # The whole cluster at once: what it was doing no longer matters, only that it is gone.
    deployment.kill("cluster")
    assert "deadlock" not in deployment.log("cluster")


def _busy_job(caller: ApiKey, quick: int) -> BatchJob:
    """A job of ``caller`` the cluster is working on: ``quick`` fast targets, then one that blocks."""
    urls: list[object] = [*(f"{BASE}busy/{i}?sleep=0.05" for i in range(quick)), f"{BASE}busy/last?block=1"]
    job = jobs.submit(caller, validate_targets(urls)).job
    _working_on(job)
    return job


def _working_on(job: BatchJob) -> None:
    wait_for(lambda: BatchJob.objects.get(pk=job.pk).targets_done >= 1, 60, "the cluster to start on the job")


@pytest.mark.parametrize("round_", range(2))
def test_identical_submits_reuse_the_job_the_cluster_is_finishing_and_never_fail(cluster, settings, round_):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    caller, _ = ApiKey.issue(f"twin{round_}")
    targets: list[object] = [f"{BASE}twin/{i}?sleep=0.2" for i in range(8)]
    twin = jobs.submit(caller, validate_targets(targets)).job
    wait_for(
        lambda: BatchJob.objects.get(pk=twin.pk).targets_done >= 1, 60, "the cluster to start on the job"
    )
    answers: list[str] = []
    races = 0
    # Race until the cluster has settled the twin, and once more after: the settle is the
    # transaction that checks the foreign key to the caller row.
    while True:
        settled_before = not BatchJob.objects.get(pk=twin.pk).is_live
        answers += race([lambda: jobs.submit(caller, validate_targets(targets)) for _ in range(32)])
        races += 1
        if settled_before:
            break
    assert races >= 2
    assert Counter(answers) == {f"reused:{twin.pk}": 32 * races}
    twin.refresh_from_db()
    assert (twin.status, twin.targets_done) == ("done", len(targets))
    assert BatchJob.objects.filter(caller=caller).count() == 1


def test_one_caller_with_distinct_targets_gets_exactly_its_cap_beside_its_busy_job(cluster, settings):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 3
    settings.SIFT_BATCH_JOBS_TOTAL = 100
    caller, _ = ApiKey.issue("racer")
    busy = _busy_job(caller, quick=30)
    answers = race(
        [lambda i=i: jobs.submit(caller, validate_targets([f"{BASE}{i}?{SLOW}"])) for i in range(N_THREADS)]
    )
    assert BatchJob.objects.get(pk=busy.pk).is_live
    assert Counter(a.split(":")[0] for a in answers) == {"new": 2, "caller_busy": N_THREADS - 2}
    assert BatchJob.objects.filter(caller=caller).count() == 3


def test_many_callers_get_exactly_the_total_cap_beside_a_busy_job(cluster, settings):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    settings.SIFT_BATCH_JOBS_TOTAL = 8
    callers = [ApiKey.issue(f"crowd-{i}")[0] for i in range(N_THREADS)]
    busy = _busy_job(callers[0], quick=30)
    answers = race([lambda c=c: jobs.submit(c, validate_targets([f"{BASE}?{SLOW}"])) for c in callers])
    assert BatchJob.objects.get(pk=busy.pk).is_live
    assert Counter(a.split(":")[0] for a in answers) == {
        "new": 7,
        "caller_busy": 1,
        "jobs_busy": N_THREADS - 8,
    }
    assert BatchJob.objects.count() == 8
