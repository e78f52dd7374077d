"""Waking the workers: one rule, ``WORKERS`` drains waiting while a live job has work (docs/workers.md)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import OrmQ
from django_q.tasks import async_task

from batch import jobs
from batch.engine import heartbeat, tasks, wakeups
from batch.models import BatchJob

from . import fetchers
from .factories import scripted_job


@pytest.fixture
def two_workers(settings):
    settings.SIFT_BATCH_WORKERS = 2


@pytest.fixture
def stranded_work(agent) -> None:
    """A job whose targets wait; in a ``db`` test its submit's wake-up never runs."""
    _, client = agent
    assert client.post("/v1/batch", {"targets": ["https://example.org/"]}).status_code == 202
    assert not OrmQ.objects.exists()


def _take_queued_tasks() -> None:
    """As the pusher does: a taken task's row stays, locked, until the task has run."""
    OrmQ.objects.filter(lock__lte=timezone.now()).update(lock=timezone.now() + timedelta(hours=1))


def test_work_waiting_gets_one_drain_per_worker(stranded_work, two_workers):
    assert wakeups.wake_workers() == 2
    assert OrmQ.objects.count() == 2


def test_no_work_queues_no_drain(db, two_workers):
    assert wakeups.wake_workers() == 0
    assert not OrmQ.objects.exists()


def test_a_cancelled_job_is_no_work(stranded_work, two_workers):
    jobs.cancel(BatchJob.objects.get())
    assert wakeups.wake_workers() == 0


def test_drains_already_waiting_are_not_queued_again(stranded_work, two_workers):
    assert wakeups.wake_workers() == 2
    assert wakeups.wake_workers() == 0
    assert OrmQ.objects.count() == 2


def test_only_waiting_drains_count_so_running_ones_about_to_end_never_strand_work(stranded_work, two_workers):
    async_task("batch.engine.tasks.sweep_and_evict")  # not a drain: never counted
    async_task(wakeups.DRAIN_TASK)
    _take_queued_tasks()  # the drain runs, and may be about to end
    assert wakeups.waiting_drains() == 0
    assert wakeups.wake_workers() == 2
    assert wakeups.waiting_drains() == 2


def test_a_single_worker_gets_a_single_drain(stranded_work, settings):
    settings.SIFT_BATCH_WORKERS = 1
    assert wakeups.wake_workers() == 1


def test_the_schedule_task_wakes_stranded_work(stranded_work, two_workers):
    assert tasks.wake_stranded_work() == 2
    assert OrmQ.objects.count() == 2


def test_a_drain_that_ends_with_work_left_makes_sure_drains_wait_to_go_on(
    stranded_work, two_workers, settings, monkeypatch, tmp_path
):
    monkeypatch.setenv("SIFT_TEST_FETCH_DIR", str(tmp_path))
    settings.SIFT_TEST_FETCH_FUNC = "tests.fetchers.scripted"
    settings.SIFT_BATCH_DRAIN_SECONDS = 0  # the budget is spent before the first claim
    assert tasks.drain_targets() == 0
    assert wakeups.waiting_drains() == 2


def test_a_drain_that_finished_the_work_queues_nothing(agent, settings, monkeypatch, tmp_path):
    monkeypatch.setenv("SIFT_TEST_FETCH_DIR", str(tmp_path))
    settings.SIFT_TEST_FETCH_FUNC = "tests.fetchers.scripted"
    caller, _ = agent
    scripted_job(caller, "a=1")
    assert tasks.drain_targets() == 1
    assert not OrmQ.objects.exists()
    assert fetchers.read_calls(tmp_path)


def test_a_heartbeat_only_beats(stranded_work):
    heartbeat.beat("host:1")
    assert not OrmQ.objects.exists()


def test_a_process_start_wakes_the_workers_from_a_thread(db, monkeypatch):
    woken = threading.Event()
    monkeypatch.setattr(wakeups, "wake_workers", woken.set)
    wakeups.wake_on_process_start()
    assert woken.wait(5)
