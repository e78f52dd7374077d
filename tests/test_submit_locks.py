"""A submit's locks on PostgreSQL come in one order, caller row then submit tokens (docs/decisions.md).

The two are taken by one statement; these tests hold it to the order that keeps two submits
from waiting on each other in a cycle: while the caller row is held elsewhere, the submit
waiting for it holds no token.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from batch import jobs
from batch.api.validation import validate_targets
from batch.models import SUBMIT_TOKENS, ApiKey, BatchJob, SubmitLock

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
    raise AssertionError("the submit never waited for the caller row")


@pytest.mark.parametrize("jobs_total", [1000, 8], ids=["one-token", "every-token"])
def test_a_submit_waiting_for_its_caller_row_holds_no_token(settings, jobs_total):
    # 1000 is far from the cap: the submit takes one token; 8 is within SUBMIT_TOKENS of it: every one.
    settings.SIFT_BATCH_JOBS_TOTAL = jobs_total
    caller, _ = ApiKey.issue("waiter")
    holding, release = threading.Event(), threading.Event()
    answers: list[str] = []

    def hold_the_caller_row() -> None:
        try:
            with transaction.atomic():
                list(ApiKey.objects.select_for_update(no_key=True).filter(pk=caller.pk))
                holding.set()
                release.wait(30)
        finally:
            connection.close()

    def submit() -> None:
        try:
            answers.append(jobs.submit(caller, validate_targets([URL])).job.id)
        except Exception as exc:
            answers.append(repr(exc))
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_caller_row)
    holder.start()
    assert holding.wait(30)
    submitter = threading.Thread(target=submit)
    submitter.start()
    try:
        _wait_until_a_session_waits_for_a_lock()
        with transaction.atomic():
            free = SubmitLock.objects.select_for_update(skip_locked=True).values_list("pk", flat=True)
            assert len(list(free)) == SUBMIT_TOKENS
    finally:
        release.set()
        holder.join()
        submitter.join()
    assert len(answers) == 1
    assert BatchJob.objects.filter(pk=answers[0], caller=caller).exists()
