"""The request path's plain statements are prepared on PostgreSQL once they repeat (batch/statements.py)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from batch import jobs
from batch.api.auth import caller_for_key
from batch.api.validation import validate_targets
from batch.models import ApiKey

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's"
)


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [statement for (statement,) in cursor.fetchall()]


def test_the_key_lookup_and_the_submit_statements_are_prepared_when_they_repeat(db, settings):
    settings.SIFT_BATCH_JOBS_PER_CALLER = settings.SIFT_BATCH_JOBS_TOTAL = 1000
    caller, raw_key = ApiKey.issue("repeater")
    for i in range(6):
        assert caller_for_key(raw_key) == caller
        jobs.submit(caller, validate_targets([f"https://example.org/{i}"]))
    prepared = _prepared()
    assert any('FROM "batch_apikey" WHERE "key_sha256" = $1' in s for s in prepared)
    assert any("FOR NO KEY UPDATE" in s for s in prepared)
    assert any('INSERT INTO "batch_batchjob"' in s for s in prepared)
    # The ORM's own queries stay bound on the client: never prepared.
    for _ in range(6):
        assert list(ApiKey.objects.filter(name="repeater")) == [caller]
    assert not any('"batch_apikey"."name"' in s for s in _prepared())


def test_the_query_log_keeps_a_prepared_statements_text(db):
    caller, raw_key = ApiKey.issue("logged")
    with CaptureQueriesContext(connection) as captured:
        for _ in range(7):
            assert caller_for_key(raw_key) == caller
    logged = [query["sql"] for query in captured.captured_queries]
    assert None not in logged
    assert sum('FROM "batch_apikey" WHERE "key_sha256"' in sql for sql in logged) == 7
