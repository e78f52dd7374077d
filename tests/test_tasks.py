"""The cluster's entry points and schedules (docs/workers.md)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from django_q.models import OrmQ, Schedule

from batch.engine import tasks, wakeups
from batch.models import BatchJob

from .factories import submit


def test_migrations_schedule_sweep_evict_and_a_drain_safety_net(db):
    schedules = dict(Schedule.objects.values_list("func", "minutes"))
    assert schedules == {"batch.engine.tasks.sweep_and_evict": 5, "batch.engine.tasks.wake_stranded_work": 1}
    assert set(Schedule.objects.values_list("repeats", flat=True)) == {-1}


def test_sweep_and_evict_task_removes_expired_jobs(agent, settings):
    settings.SIFT_BATCH_TTL = 3600
    _, client = agent
    job_id = submit(client, ["https://example.org/"])["id"]
    BatchJob.objects.filter(pk=job_id).update(last_read_at=timezone.now() - timedelta(hours=2))
    assert (
        tasks.sweep_and_evict()
        == "sweep: removed 1 jobs, 1 targets, 0 bytes; evict: removed 0 jobs, 0 targets, 0 bytes"
    )
    assert not BatchJob.objects.exists()


def test_a_submit_queues_one_drain_per_worker_unless_one_is_waiting(
    agent, settings, django_capture_on_commit_callbacks
):
    settings.SIFT_BATCH_WORKERS = 2
    settings.SIFT_BATCH_JOBS_PER_CALLER = 5
    _, client = agent
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/v1/batch", {"targets": ["https://example.org/a"]})
    assert OrmQ.objects.count() == 2
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/v1/batch", {"targets": ["https://example.org/b"]})
    assert OrmQ.objects.count() == 2
    assert wakeups.waiting_drains() == 2
