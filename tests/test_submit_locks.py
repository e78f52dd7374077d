"""A submit's locks on PostgreSQL: the caller's row, then the one ``SubmitLock`` row (docs/decisions.md).

Always in that order, so two submits never wait on each other in a cycle; and only a submit
that creates a job takes the second, so reuses and refusals of a busy caller never queue
behind other callers' submits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import pytest
from django.db import connection, transaction
from django.db.models import Model

from batch import jobs
from batch.errors import Refused
from batch.models import ApiKey, BatchJob, SubmitLock
from doors.validation import validate_targets

URL = "https://example.org/"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks only exist on PostgreSQL"),
]

WAITING_FOR_A_LOCK = """
    SELECT count(*) FROM pg_stat_activity
    WHERE datname = current_database() AND wait_event_type = 'Lock'
"""


def _wait_until_a_session_waits_for_a_lock(timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(WAITING_FOR_A_LOCK)
            if cursor.fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError("the submit never waited for a lock")


@contextmanager
def row_locked_elsewhere(model: type[Model], pk: int, *, no_key: bool = False) -> Iterator[None]:
    """Hold ``model``'s row ``pk`` locked from another connection for the block."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                list(model._default_manager.select_for_update(no_key=no_key).filter(pk=pk))
                holding.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(30)
    try:
        yield
    finally:
        release.set()
        holder.join()


def _in_a_thread(submit: Callable[[], jobs.Submitted], answers: list[str]) -> threading.Thread:
    def run() -> None:
        try:
            answers.append(submit().job.id)
        except Refused as exc:
            answers.append(exc.code)
        except Exception as exc:
            answers.append(repr(exc))
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_submit_waiting_for_its_caller_row_holds_no_submit_lock():
    caller, _ = ApiKey.issue("waiter")
    answers: list[str] = []
    with row_locked_elsewhere(ApiKey, caller.pk, no_key=True):
        submitter = _in_a_thread(lambda: jobs.submit(caller, validate_targets([URL])), answers)
        _wait_until_a_session_waits_for_a_lock()
        with transaction.atomic():
            free = SubmitLock.objects.select_for_update(skip_locked=True).values_list("pk", flat=True)
            assert list(free) == [1]
    submitter.join()
    assert len(answers) == 1
    assert BatchJob.objects.filter(pk=answers[0], caller=caller).exists()


def test_a_reuse_and_a_busy_callers_refusal_never_wait_for_the_submit_lock(settings):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    caller, _ = ApiKey.issue("reuser")
    twin = jobs.submit(caller, validate_targets([URL])).job
    answers: list[str] = []
    with row_locked_elsewhere(SubmitLock, 1):
        for url in (URL, URL + "other"):
            thread = _in_a_thread(partial(jobs.submit, caller, validate_targets([url])), answers)
            thread.join(10)
            assert not thread.is_alive(), "the submit waited for the submit lock"
    assert answers == [twin.id, "caller_busy"]


def test_a_submit_that_creates_a_job_waits_for_the_submit_lock():
    caller, _ = ApiKey.issue("creator")
    answers: list[str] = []
    with row_locked_elsewhere(SubmitLock, 1):
        submitter = _in_a_thread(lambda: jobs.submit(caller, validate_targets([URL])), answers)
        _wait_until_a_session_waits_for_a_lock()
        assert answers == []
    submitter.join()
    assert BatchJob.objects.filter(pk=answers[0], caller=caller).exists()
