"""The worker side of the lifecycle, in process: claim, store, fairness, busy retry, lost leases."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from batch import jobs
from batch.engine import wakeups, worker
from batch.models import BatchJob, BatchTarget, WorkerSlot
from fetch.targets import Target

from . import fetchers
from .factories import SCRIPTED_BASE, scripted_job

BASE = SCRIPTED_BASE
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def fetch_dir(tmp_path, monkeypatch, settings):
    monkeypatch.setenv("SIFT_TEST_FETCH_DIR", str(tmp_path))
    settings.SIFT_BATCH_JOBS_PER_CALLER = 10
    settings.SIFT_BATCH_WORKERS = 1
    return tmp_path


def _run_all() -> int:
    return worker.drain(fetchers.scripted, budget=30)


def test_a_drained_job_ends_done_with_one_result_per_target(agent):
    caller, _ = agent
    job = scripted_job(caller, "a=1", "b=1", "c=1")
    assert _run_all() == 3
    job.refresh_from_db()
    assert (job.status, job.targets_done, job.targets_failed) == ("done", 3, 0)
    assert job.finished_at is not None
    assert job.n_bytes == sum(job.targets.values_list("n_bytes", flat=True)) > 0
    results = list(job.targets.values_list("status", "attempts", "result__content"))
    assert results == [("done", 1, f"content of {BASE}{i}?{q}") for i, q in enumerate(["a=1", "b=1", "c=1"])]


def test_some_failing_targets_make_the_job_partial_and_all_failing_make_it_failed(agent):
    caller, _ = agent
    partial = scripted_job(caller, "ok=1", "fail=timeout")
    failed = scripted_job(caller, "fail=blocked", "boom=1")
    _run_all()
    partial.refresh_from_db()
    failed.refresh_from_db()
    assert (partial.status, partial.targets_done, partial.targets_failed) == ("partial", 2, 1)
    assert (failed.status, failed.targets_done, failed.targets_failed) == ("failed", 2, 2)
    assert failed.error == worker.ALL_FAILED
    assert partial.error == ""
    bad = partial.targets.get(idx=1)
    assert (bad.outcome, bad.error, bad.hint, bad.result) == (
        "timeout",
        "scripted timeout",
        "scripted hint",
        None,
    )
    crashed = failed.targets.get(idx=1)
    assert crashed.outcome == "internal"
    assert "scripted crash" not in crashed.error


def test_jobs_take_turns_one_target_each_in_submit_order(agent, make_caller, fetch_dir):
    caller, _ = agent
    other, _ = make_caller("other")
    big = scripted_job(caller, *[f"big={i}" for i in range(4)])
    small = scripted_job(other, "small=1")
    _run_all()
    order = [url.split("?")[1] for event, _, _, url in fetchers.read_calls(fetch_dir) if event == "start"]
    assert order == ["big=0", "small=1", "big=1", "big=2", "big=3"]
    big.refresh_from_db()
    small.refresh_from_db()
    assert big.status == small.status == "done"


def test_a_claim_takes_a_slot_and_no_second_claim_fits_with_one_worker(agent):
    caller, _ = agent
    scripted_job(caller, "a=1", "b=1")
    first = worker.claim_next_target()
    assert first is not None
    assert worker.claim_next_target() is None
    assert WorkerSlot.objects.get(number=0).target_id == first.target_id
    assert BatchJob.objects.get().status == "running"
    worker.run_claim(first, fetchers.scripted)
    assert WorkerSlot.objects.get(number=0).target_id is None
    assert worker.claim_next_target() is not None


def test_two_workers_hold_two_slots_and_never_three(agent, settings):
    settings.SIFT_BATCH_WORKERS = 2
    caller, _ = agent
    scripted_job(caller, "a=1", "b=1", "c=1")
    claims = [worker.claim_next_target() for _ in range(3)]
    assert [c is not None for c in claims] == [True, True, False]


def test_busy_twice_then_success_stores_the_result_with_attempts(agent, settings):
    settings.SIFT_BATCH_RETRY_WAIT = 2
    caller, _ = agent
    job = scripted_job(caller, "busy=2")
    with time_machine.travel(T0, tick=False) as clock:
        for _ in range(3):
            claim = worker.claim_next_target()
            assert claim is not None
            worker.run_claim(claim, fetchers.scripted)
            assert worker.claim_next_target() is None  # waiting out RETRY_WAIT, or finished
            clock.shift(timedelta(seconds=2.5))
    target = job.targets.get()
    assert (target.status, target.attempts) == ("done", 3)
    assert BatchJob.objects.get().status == "done"


def test_a_longer_retry_after_from_upstream_is_honoured(agent, settings):
    settings.SIFT_BATCH_RETRY_WAIT = 2
    caller, _ = agent
    job = scripted_job(caller, "busy=1&wait=30")
    with time_machine.travel(T0, tick=False):
        worker.run_claim(worker.claim_next_target(), fetchers.scripted)
    assert job.targets.get().not_before == T0 + timedelta(seconds=30)


def test_always_busy_fails_busy_after_retry_for_while_other_jobs_finish(agent, make_caller, settings):
    settings.SIFT_BATCH_RETRY_WAIT = 1
    settings.SIFT_BATCH_RETRY_FOR = 5
    caller, _ = agent
    other, _ = make_caller("other")
    stuck = scripted_job(caller, "busy=always")
    fine = scripted_job(other, "ok=1")
    with time_machine.travel(T0, tick=False) as clock:
        for _ in range(20):
            claim = worker.claim_next_target()
            if claim:
                worker.run_claim(claim, fetchers.scripted)
            clock.shift(timedelta(seconds=1.1))
    fine.refresh_from_db()
    stuck.refresh_from_db()
    assert fine.status == "done"
    assert stuck.status == "failed"
    target = stuck.targets.get()
    assert target.outcome == "busy"
    assert target.attempts >= 5


def test_an_expired_claim_returns_to_pending_and_the_third_loss_fails_worker_lost(agent, settings):
    settings.SIFT_BATCH_CLAIM_LEASE = 60
    caller, _ = agent
    job = scripted_job(caller, "a=1")
    with time_machine.travel(T0, tick=False) as clock:
        for lost in (1, 2):
            assert worker.claim_next_target() is not None  # ... and the worker dies
            clock.shift(timedelta(seconds=61))
            assert worker.recover_lost_claims() == 1
            target = job.targets.get()
            assert (target.status, target.lost_leases, target.attempts) == ("pending", lost, lost)
        stale = worker.claim_next_target()
        clock.shift(timedelta(seconds=61))
        worker.recover_lost_claims()
        worker.run_claim(stale, fetchers.scripted)  # a late result from a presumed-dead worker
    target = job.targets.get()
    assert (target.status, target.outcome, target.attempts, target.result) == (
        "failed",
        "worker_lost",
        3,
        None,
    )
    job.refresh_from_db()
    assert (job.status, job.targets_done, job.targets_failed) == ("failed", 1, 1)


def test_a_late_result_after_the_lease_was_lost_is_not_stored_twice(agent, settings):
    settings.SIFT_BATCH_CLAIM_LEASE = 60
    caller, _ = agent
    job = scripted_job(caller, "a=1")
    with time_machine.travel(T0, tick=False) as clock:
        slow = worker.claim_next_target()
        clock.shift(timedelta(seconds=61))
        fresh = worker.claim_next_target()  # recovers the lost claim and takes it again
        assert fresh is not None
        assert fresh.attempt == 2
        worker.run_claim(fresh, fetchers.scripted)
        worker.run_claim(slow, fetchers.scripted)
    job.refresh_from_db()
    assert (job.status, job.targets_done) == ("done", 1)
    # The fresh claim's call ran first, so the stored result is the one numbered 1.
    assert job.targets.get().result["meta"]["attempt"] == 1


def test_a_late_result_counts_nothing_in_its_job_either(agent, settings):
    """The store and the job's counters go together: a store that changed nothing counts nothing."""
    settings.SIFT_BATCH_CLAIM_LEASE = 60
    caller, _ = agent
    job = scripted_job(caller, "a=1", "b=1", "c=1")
    with time_machine.travel(T0, tick=False) as clock:
        slow = worker.claim_next_target()
        clock.shift(timedelta(seconds=61))
        fresh = worker.claim_next_target()
        assert fresh is not None
        assert (fresh.idx, fresh.attempt) == (0, 2)
        worker.run_claim(fresh, fetchers.scripted)
        worker.run_claim(slow, fetchers.scripted)
    job.refresh_from_db()
    assert (job.status, job.targets_done, job.n_bytes) == ("running", 1, job.targets.get(idx=0).n_bytes)
    assert list(job.targets.values_list("status", flat=True)) == ["done", "pending", "pending"]


def test_cancel_with_a_target_in_flight_keeps_cancelled_and_stores_the_result(agent):
    caller, _ = agent
    job = scripted_job(caller, "a=1", "b=1", "c=1")
    in_flight = worker.claim_next_target()
    assert jobs.cancel(job)
    worker.run_claim(in_flight, fetchers.scripted)
    assert worker.claim_next_target() is None
    job.refresh_from_db()
    assert (job.status, job.targets_done) == ("cancelled", 1)
    assert list(job.targets.values_list("status", flat=True)) == ["done", "pending", "pending"]


def test_nothing_is_claimed_from_a_cancelled_job(agent):
    caller, _ = agent
    job = scripted_job(caller, "a=1")
    jobs.cancel(job)
    assert worker.claim_next_target() is None
    assert not wakeups.has_unfinished_work()
    assert BatchTarget.objects.get().status == "pending"


def test_a_cancel_landing_between_reading_a_target_and_claiming_it_drops_the_claim(agent):
    caller, _ = agent
    job = scripted_job(caller, "a=1")
    cancelled: list[bool] = []

    def cancel_once_the_target_is_read(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not cancelled and sql.startswith("SELECT") and '"batch_batchtarget"."url"' in sql:
            cancelled.append(jobs.cancel(BatchJob.objects.get(pk=job.pk)))
        return result

    with connection.execute_wrapper(cancel_once_the_target_is_read):
        assert worker.claim_next_target() is None
    assert cancelled == [True]
    target = job.targets.get()
    assert (target.status, target.attempts) == ("pending", 0)
    assert WorkerSlot.objects.filter(target__isnull=False).count() == 0


def test_log_lines_carry_ids_and_counts_but_never_a_url_or_host_even_at_debug(agent, caplog):
    caller, _ = agent
    scripted_job(caller, "ok=1", "fail=timeout", "busy=1")
    with caplog.at_level("DEBUG"):
        _run_all()
        job = BatchJob.objects.get()
        jobs.cancel(job)
    assert "claimed" in caplog.text
    assert job.id in caplog.text
    assert "upstream.test" not in caplog.text
    assert "https://" not in caplog.text


# --- one target after another ------------------------------------------------------------------


def test_a_store_outside_a_drain_frees_its_slot_and_a_drain_ends_holding_none(agent):
    caller, _ = agent
    job = scripted_job(caller, "a=1", "b=1", "c=1", "d=1")
    claim = worker.claim_next_target()
    assert claim is not None
    worker.run_claim(claim, fetchers.scripted)
    assert not WorkerSlot.objects.filter(target__isnull=False).exists()
    assert _run_all() == 3
    assert list(job.targets.values_list("status", "attempts")) == [("done", 1)] * 4
    assert not WorkerSlot.objects.filter(target__isnull=False).exists()


def test_a_drain_takes_a_slot_once_and_hands_it_on_from_target_to_target(agent):
    caller, _ = agent
    job = scripted_job(caller, "a=1", "b=1", "c=1")
    with CaptureQueriesContext(connection) as queries:
        assert _run_all() == 3
    slot_reads = [q for q in queries if q["sql"].startswith("SELECT") and "batch_workerslot" in q["sql"]]
    assert len(slot_reads) == 1
    assert list(job.targets.values_list("status", flat=True)) == ["done"] * 3
    assert not WorkerSlot.objects.filter(target__isnull=False).exists()


def test_a_stop_between_two_targets_frees_the_slot_the_drain_kept(agent, monkeypatch):
    caller, _ = agent
    scripted_job(caller, "a=1", "b=1")
    monkeypatch.setattr(worker, "IN_FLIGHT", worker.InFlight())
    with worker.IN_FLIGHT.lock:
        claim = worker._claim_keeping_slot(timezone.now())
    assert isinstance(claim, worker.Claim)
    assert claim.keep_slot
    worker.run_claim(claim, fetchers.scripted)
    assert WorkerSlot.objects.get(number=claim.slot).target_id == claim.target_id  # kept after the store
    worker.stop_claiming(1)
    assert not WorkerSlot.objects.filter(target__isnull=False).exists()


def test_two_jobs_alternate_target_by_target_within_a_drain(agent, make_caller, fetch_dir):
    caller, _ = agent
    other, _ = make_caller("other")
    scripted_job(caller, "x=0", "x=1", "x=2")
    scripted_job(other, "y=0", "y=1")
    _run_all()
    order = [url.split("?")[1] for event, _, _, url in fetchers.read_calls(fetch_dir) if event == "start"]
    assert order == ["x=0", "y=0", "x=1", "y=1", "x=2"]


def test_a_stop_during_a_fetch_lets_it_be_stored_and_claims_nothing_more(agent, monkeypatch):
    caller, _ = agent
    job = scripted_job(caller, "a=1", "b=1")
    monkeypatch.setattr(worker, "IN_FLIGHT", worker.InFlight())

    def stopped_mid_fetch(caller: worker.Caller, target: Target) -> worker.Result:
        worker.stop_claiming(1)  # the stop arrives while the first target is fetched
        return fetchers.scripted(caller, target)

    assert worker.drain(stopped_mid_fetch, budget=30) == 1
    assert list(job.targets.values_list("status", flat=True)) == ["done", "pending"]
    assert worker.IN_FLIGHT.claim is None
    assert not WorkerSlot.objects.filter(target__isnull=False).exists()


def test_a_busy_retry_frees_the_slot_for_the_next_target(agent, settings):
    settings.SIFT_BATCH_RETRY_WAIT = 60
    caller, _ = agent
    job = scripted_job(caller, "busy=1", "b=1")
    claim = worker.claim_next_target()
    assert claim is not None
    worker.run_claim(claim, fetchers.scripted)
    assert not WorkerSlot.objects.filter(target__isnull=False).exists()
    following = worker.claim_next_target()
    assert following is not None
    assert following.idx == 1
    assert list(job.targets.values_list("status", flat=True)) == ["pending", "running"]


def test_the_last_store_settles_the_job_and_earlier_ones_only_count(agent):
    caller, _ = agent
    job = scripted_job(caller, "a=1", "fail=timeout")
    first = worker.claim_next_target()
    worker.run_claim(first, fetchers.scripted)
    job.refresh_from_db()
    assert (job.status, job.targets_done, job.targets_failed, job.finished_at) == ("running", 1, 0, None)
    worker.run_claim(worker.claim_next_target(), fetchers.scripted)
    job.refresh_from_db()
    assert (job.status, job.targets_done, job.targets_failed) == ("partial", 2, 1)
    assert job.finished_at is not None


def test_targets_are_numbered_in_the_order_they_end_not_by_index(agent, settings):
    settings.SIFT_BATCH_WORKERS = 2
    caller, _ = agent
    job = scripted_job(caller, "a=1", "fail=timeout", "c=1")
    first, second = worker.claim_next_target(), worker.claim_next_target()
    assert None not in (first, second)
    assert [t.seq for t in job.targets.all()] == [None, None, None]
    worker.run_claim(second, fetchers.scripted)
    worker.run_claim(first, fetchers.scripted)
    worker.run_claim(worker.claim_next_target(), fetchers.scripted)
    assert list(job.targets.values_list("idx", "seq")) == [(0, 2), (1, 1), (2, 3)]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks only exist on PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_two_stores_at_once_count_both_targets_and_settle_the_job_once(agent, settings):
    """Each store locks the job's row before counting: exactly one of them sees the last target."""
    settings.SIFT_BATCH_WORKERS = 2
    caller, _ = agent
    for run in range(5):
        # Other targets each run: the same ones would answer the first, finished job (content reuse).
        job = scripted_job(caller, f"a={run}", f"b={run}")
        claims = [worker.claim_next_target(), worker.claim_next_target()]
        assert None not in claims
        barrier = threading.Barrier(2)

        def store(claim: worker.Claim, barrier: threading.Barrier = barrier) -> None:
            try:
                barrier.wait(5)
                worker.run_claim(claim, fetchers.scripted)
            finally:
                connection.close()

        threads = [threading.Thread(target=store, args=(claim,)) for claim in claims]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        job.refresh_from_db()
        assert (job.status, job.targets_done) == ("done", 2)
        assert BatchJob.objects.filter(pk=job.pk, finished_at__isnull=False).count() == 1
        assert sorted(job.targets.values_list("seq", flat=True)) == [1, 2]
