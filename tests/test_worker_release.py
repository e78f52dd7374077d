"""Giving claims back, in process: a stopping worker, and a claim the database going away interrupted."""

from __future__ import annotations

import sqlite3
import threading

import psycopg
import pytest
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from batch import jobs
from batch.engine import stopping, worker
from batch.models import BatchJob, BatchTarget, WorkerSlot
from doors.validation import validate_targets
from fetch.targets import Target

from . import fetchers
from .deployment import wait_for

BASE = "https://upstream.test/"


@pytest.fixture(autouse=True)
def fetch_dir(tmp_path, monkeypatch, settings):
    monkeypatch.setenv("SIFT_TEST_FETCH_DIR", str(tmp_path))
    settings.SIFT_BATCH_JOBS_PER_CALLER = 10
    settings.SIFT_BATCH_WORKERS = 1
    return tmp_path


@pytest.fixture
def fresh_in_flight(monkeypatch) -> worker.InFlight:
    """A clean stop state for this test: a stop must not leak into the next one."""
    state = worker.InFlight()
    monkeypatch.setattr(worker, "IN_FLIGHT", state)
    return state


def _submit(caller, *queries: str) -> BatchJob:
    return jobs.submit(caller, validate_targets([f"{BASE}{i}?{q}" for i, q in enumerate(queries)])).job


@pytest.mark.django_db
def test_a_released_claim_is_pending_at_once_with_its_slot_free_and_no_loss_counted(agent):
    caller, _ = agent
    job = _submit(caller, "a=1")
    claim = worker.claim_next_target()
    assert claim is not None
    assert worker.release_claim(claim) is True
    target = job.targets.get()
    assert (target.status, target.attempts, target.lost_leases, target.lease_until) == ("pending", 1, 0, None)
    assert not WorkerSlot.objects.filter(target__isnull=False).exists()
    again = worker.claim_next_target()
    assert again is not None
    assert (again.target_id, again.attempt) == (claim.target_id, 2)


@pytest.mark.django_db
def test_a_claim_stored_before_the_release_keeps_its_result_and_a_store_after_it_is_dropped(agent):
    caller, _ = agent
    job = _submit(caller, "a=1", "b=1")
    first = worker.claim_next_target()
    assert first is not None
    worker.run_claim(first, fetchers.scripted)
    assert worker.release_claim(first) is False
    assert job.targets.get(idx=0).status == "done"

    second = worker.claim_next_target()
    assert second is not None
    assert worker.release_claim(second)
    worker.run_claim(second, fetchers.scripted)  # the late answer of the stopping worker
    job.refresh_from_db()
    assert (job.targets.get(idx=1).status, job.targets_done) == ("pending", 1)


@pytest.mark.django_db
def test_an_interrupted_claim_is_found_by_its_own_timestamp_only(agent):
    caller, _ = agent
    job = _submit(caller, "a=1")
    claimed_at = timezone.now()
    assert worker.claim_next_target(claimed_at) is not None  # ... and its answer was lost
    assert worker.release_interrupted_claim(timezone.now()) == 0
    assert worker.release_interrupted_claim(claimed_at) == 1
    target = job.targets.get()
    assert (target.status, target.lost_leases) == ("pending", 0)
    assert not WorkerSlot.objects.filter(target__isnull=False).exists()


@pytest.mark.django_db(transaction=True)
def test_a_fetch_cut_by_the_database_going_away_is_given_back_and_run_again(agent, fresh_in_flight, caplog):
    caller, _ = agent
    job = _submit(caller, "a=1")
    calls: list[str] = []

    def cut_once(who: worker.Caller, target: Target) -> worker.Result:
        calls.append(target.url)
        if len(calls) == 1:
            raise _wrapped(
                psycopg.errors.AdminShutdown("terminating connection due to administrator command")
            )
        return fetchers.scripted(who, target)

    try:
        assert worker.drain(cut_once, budget=10) == 1
    finally:
        connection.close()
    target = job.targets.get()
    assert (target.status, target.attempts, target.lost_leases) == ("done", 2, 0)
    assert len(calls) == 2
    assert "the database is unavailable" in caplog.text


@pytest.mark.django_db
def test_a_stopping_drain_takes_no_new_claim(agent, fresh_in_flight):
    caller, _ = agent
    job = _submit(caller, "a=1", "b=1")
    worker.stop_claiming(1)
    assert worker.drain(fetchers.scripted, budget=5) == 0
    assert list(job.targets.values_list("status", flat=True)) == ["pending", "pending"]


@pytest.mark.django_db(transaction=True)
def test_a_stop_mid_target_gives_the_target_back_and_exits(agent, fresh_in_flight, monkeypatch, tmp_path):
    caller, _ = agent
    job = _submit(caller, "block=1")
    exits: list[int] = []
    monkeypatch.setattr(stopping.os, "_exit", exits.append)

    def drain_in_a_thread() -> None:
        try:
            worker.drain(fetchers.scripted, budget=30)
        finally:
            connection.close()  # this thread's own connection

    drain = threading.Thread(target=drain_in_a_thread)
    drain.start()
    try:
        wait_for(lambda: list(tmp_path.glob("blocked-*")), 10, "the target to start")
        stopping.stop_worker_process(grace=0.5)
        assert exits == [0]
        target = BatchTarget.objects.get(job=job)
        assert (target.status, target.attempts, target.lost_leases) == ("pending", 1, 0)
    finally:
        (tmp_path / "release").touch()
        drain.join(10)
    assert BatchTarget.objects.get(job=job).status == "pending", "the late answer was dropped"


def _wrapped(error: Exception) -> Exception:
    """As Django raises it: its own class, the driver's error as the cause."""
    wrapped = OperationalError(str(error))
    wrapped.__cause__ = error
    return wrapped


@pytest.mark.parametrize(
    ("cause", "went_away"),
    [
        (psycopg.errors.AdminShutdown("terminating connection due to administrator command"), True),
        (psycopg.errors.CannotConnectNow("the database system is starting up"), True),
        (psycopg.errors.ConnectionFailure("connection failure"), True),
        (psycopg.errors.QueryCanceled("canceling statement due to statement timeout"), False),
        (psycopg.errors.ProgramLimitExceeded("index row size exceeds maximum"), False),
        (psycopg.errors.DeadlockDetected("deadlock detected"), False),
    ],
)
def test_only_a_lost_connection_counts_as_the_database_going_away(cause, went_away):
    assert worker.database_went_away(_wrapped(cause)) is went_away


def test_an_interface_error_is_a_lost_connection():
    assert worker.database_went_away(InterfaceError("connection already closed")) is True


@pytest.mark.django_db
def test_sqlite_being_locked_is_not_the_database_going_away():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    assert worker.database_went_away(_wrapped(sqlite3.OperationalError("database is locked"))) is False
