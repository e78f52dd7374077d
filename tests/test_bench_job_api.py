"""The job API benchmark's seeding: copies of a finished job that read as the API reads any job."""

from __future__ import annotations

import secrets

import pytest
from django.db import connection

from batch.models import ApiKey, BatchJob, BatchTarget, hash_key
from bench.job_api import SEED_CALLER_PREFIX, TARGETS_PER_JOB, seed, seeded_counts, stored_job

from .factories import ApiClient

pytestmark = pytest.mark.django_db


@pytest.mark.postgres
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the seeding is PostgreSQL SQL")
def test_seeding_copies_a_finished_job_for_every_number_over_the_callers():
    seed(64, jobs=10, n_callers=3)
    jobs = BatchJob.objects.filter(caller__name__startswith=SEED_CALLER_PREFIX)
    assert seeded_counts() == (10, 10 * TARGETS_PER_JOB)
    assert set(jobs.values_list("status", flat=True)) == {"done"}
    assert jobs.values("caller").distinct().count() == 3
    targets = BatchTarget.objects.filter(job__in=jobs)
    assert set(targets.values_list("status", flat=True)) == {"done"}
    assert targets.values("url").distinct().count() == 10 * TARGETS_PER_JOB


def test_a_stored_job_reads_finished_with_its_content_through_the_api(make_caller):
    caller, client = make_caller("reader")
    job = stored_job(caller, "probe", content_chars=300)
    body = client.get(f"/v1/batch/{job.pk}").json()
    assert body["status"] == "done"
    assert body["targets_done"] == TARGETS_PER_JOB
    assert [len(t["result"]["content"]) for t in body["targets"]] == [300] * TARGETS_PER_JOB


@pytest.mark.postgres
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the seeding is PostgreSQL SQL")
def test_a_seeded_job_reads_as_its_callers_job_through_the_api():
    seed(64, jobs=2, n_callers=1)
    job = BatchJob.objects.filter(caller__name__startswith=SEED_CALLER_PREFIX).first()
    key = "sk_" + secrets.token_urlsafe(32)  # seeded callers' keys are never shown: give one a known key
    ApiKey.objects.filter(pk=job.caller_id).update(key_sha256=hash_key(key))
    body = ApiClient(key).get(f"/v1/batch/{job.pk}").json()
    assert body["status"] == "done"
    assert len(body["targets"]) == TARGETS_PER_JOB
