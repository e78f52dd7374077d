"""Who wakes the workers, and how many drains each reason queues (docs/workers.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone
from django_q.models import OrmQ
from django_q.tasks import async_task

from batch import heartbeat, tasks, wakeups
from batch.wakeups import Wake


@pytest.fixture
def two_workers(settings):
    settings.SIFT_BATCH_WORKERS = 2


@pytest.fixture
def stranded_work(agent) -> None:
    """A job whose targets wait; in a ``db`` test its submit's wake-up never runs."""
    _, client = agent
    assert client.post("/v1/batch", {"targets": ["https://example.org/"]}).status_code == 202
    assert not OrmQ.objects.exists()


def test_a_submit_queues_one_drain_per_worker(db, two_workers):
    assert wakeups.ensure_workers(Wake.SUBMIT) == 2
    assert OrmQ.objects.count() == 2


def test_no_reason_but_a_hand_over_queues_a_drain_while_one_is_waiting(stranded_work, two_workers):
    wakeups.ensure_workers(Wake.SUBMIT)
    for reason in (Wake.SUBMIT, Wake.PARTNER, Wake.PROCESS_START, Wake.SCHEDULE):
        assert wakeups.ensure_workers(reason) == 0
    assert wakeups.ensure_workers(Wake.HAND_OVER) == 1
    assert OrmQ.objects.count() == 3


def _take_queued_tasks() -> None:
    """As the pusher does: a taken task's row stays, locked, until the task has run."""
    OrmQ.objects.filter(lock__lte=timezone.now()).update(lock=timezone.now() + timedelta(hours=1))


def test_a_first_claim_wakes_a_partner_only_while_fewer_drains_than_workers_live(db, two_workers):
    async_task("batch.tasks.sweep_and_evict")  # not a drain: never counted
    async_task(wakeups.DRAIN_TASK)  # the drain that asks
    _take_queued_tasks()
    assert wakeups.ensure_workers(Wake.PARTNER) == 1
    assert wakeups.ensure_workers(Wake.PARTNER) == 0  # the partner's drain waits ...
    _take_queued_tasks()
    assert wakeups.ensure_workers(Wake.PARTNER) == 0  # ... and then runs


def test_a_single_worker_has_no_partner_to_wake(db, settings):
    settings.SIFT_BATCH_WORKERS = 1
    assert wakeups.ensure_workers(Wake.PARTNER) == 0
    assert wakeups.ensure_workers(Wake.SUBMIT) == 1


def test_a_drain_that_finished_the_work_hands_over_to_nobody(db):
    assert wakeups.ensure_workers(Wake.HAND_OVER) == 0
    assert not OrmQ.objects.exists()


@pytest.mark.parametrize("reason", [Wake.PROCESS_START, Wake.SCHEDULE])
def test_a_process_start_or_the_schedule_wakes_workers_only_for_stranded_work(db, two_workers, reason):
    assert wakeups.ensure_workers(reason) == 0


@pytest.mark.parametrize("reason", [Wake.PROCESS_START, Wake.SCHEDULE])
def test_stranded_work_gets_one_drain_per_worker(stranded_work, two_workers, reason):
    assert wakeups.ensure_workers(reason) == 2


def test_the_schedule_task_wakes_stranded_work(stranded_work, two_workers):
    assert tasks.wake_stranded_work() == 2
    assert OrmQ.objects.count() == 2


def test_a_heartbeat_only_beats(stranded_work):
    heartbeat.beat("host:1")
    assert not OrmQ.objects.exists()


@pytest.fixture
def broker():
    made = wakeups.WakingBroker(list_key="sift-test-wake")
    yield made
    made.listener.close()


def test_the_broker_hands_out_what_it_queued_once(db, broker):
    task_id = broker.enqueue("payload")
    assert broker.dequeue() == [(task_id, "payload")]
    assert broker.dequeue() is None  # taken: locked until acknowledged, then gone
    broker.acknowledge(task_id)
    assert not OrmQ.objects.filter(key=broker.list_key).exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite has no NOTIFY; the pusher polls")
def test_a_queued_task_wakes_the_listening_pusher_once_it_commits(transactional_db, broker):
    broker.listener.wait(0)  # connects and listens
    with transaction.atomic():
        broker.enqueue("payload")
        assert not list(broker.listener.connection.notifies(timeout=0.2, stop_after=1))
    woken = list(broker.listener.connection.notifies(timeout=10, stop_after=1))
    assert [note.channel for note in woken] == [broker.channel]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite has no NOTIFY; the pusher polls")
def test_a_broken_listening_connection_is_made_again(transactional_db, broker):
    broker.listener.wait(0)
    broken = broker.listener.connection
    broken.close()
    broker.listener.wait(0)  # finds it closed and listens on a new one
    assert broker.listener.connection is not broken
    broker.enqueue("payload")
    assert list(broker.listener.connection.notifies(timeout=10, stop_after=1))
