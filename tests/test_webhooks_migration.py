"""Migration ``batch/0014_webhook_events``: every job's webhook delivery and its attempts carry over
as the job's ``batch.finished`` event, under the ``webhook-id`` it was sent with, and back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("batch", "0013_engine_task_paths")]
AFTER = [("batch", "0014_webhook_events")]
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
URL = "https://agent.example.net/hooks/sift"


def _migrate(targets: list[tuple[str, str]] | None = None) -> Apps:
    """Migrate to ``targets`` (every leaf when ``None``); the models as they are there."""
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.fixture
def before() -> Iterator[Apps]:
    """The database before the migration; at the latest again afterwards, whatever the test did."""
    try:
        yield _migrate(BEFORE)
    finally:
        _migrate()


def _job_with_webhook(apps: Apps, job_id: str, **delivery: object) -> None:
    caller = apps.get_model("batch", "ApiKey").objects.get_or_create(name="old", key_sha256="b" * 64)[0]
    apps.get_model("batch", "BatchJob").objects.create(
        id=job_id,
        caller=caller,
        caller_class="fleet",
        status="done",
        targets_total=1,
        targets_done=1,
        created_at=T0,
        finished_at=T0,
        last_read_at=T0,
        content_key=job_id * 2,
        callback_url=URL,
    )
    fields = {"body": f'{{"id": "{job_id}"}}', "created_at": T0, "host": "agent.example.net"} | delivery
    apps.get_model("batch", "WebhookDelivery").objects.create(job_id=job_id, **fields)


def test_deliveries_and_attempts_of_jobs_carry_over_as_batch_finished_events(before):
    sent, waiting = "a" * 32, "b" * 32
    _job_with_webhook(before, sent, attempts=2, delivered_at=T0 + timedelta(seconds=6))
    _job_with_webhook(before, waiting, attempts=1, due_at=T0 + timedelta(seconds=5))
    attempt = before.get_model("batch", "WebhookAttempt")
    attempt.objects.create(job_id=sent, at=T0, status=500)
    attempt.objects.create(job_id=sent, at=T0 + timedelta(seconds=5), status=204)
    attempt.objects.create(job_id=waiting, at=T0, error="the site did not accept a connection within 10 s")

    after = _migrate(AFTER)
    delivery = after.get_model("batch", "WebhookDelivery")
    rows = {row.job_id: row for row in delivery.objects.select_related("caller")}
    assert set(rows) == {sent, waiting}
    for job_id, row in rows.items():
        assert (row.event_id, row.event_type, row.url) == (f"msg_{job_id}", "batch.finished", URL)
        assert (row.caller.name, row.body, row.host) == ("old", f'{{"id": "{job_id}"}}', "agent.example.net")
    assert (rows[sent].attempt_count, rows[sent].delivered_at, rows[sent].due_at) == (
        2,
        T0 + timedelta(seconds=6),
        None,
    )
    assert (rows[waiting].attempt_count, rows[waiting].due_at) == (1, T0 + timedelta(seconds=5))
    attempts = after.get_model("batch", "WebhookAttempt").objects.order_by("delivery__job_id", "at")
    assert [(a.delivery.job_id, a.status, a.error) for a in attempts] == [
        (sent, 500, ""),
        (sent, 204, ""),
        (waiting, None, "the site did not accept a connection within 10 s"),
    ]


def test_the_migration_goes_back_with_the_jobs_deliveries(before):
    job_id = "c" * 32
    _job_with_webhook(before, job_id, attempts=1, due_at=T0 + timedelta(seconds=5))
    before.get_model("batch", "WebhookAttempt").objects.create(job_id=job_id, at=T0, status=503)
    _migrate(AFTER)
    back = _migrate(BEFORE)
    row = back.get_model("batch", "WebhookDelivery").objects.get()
    assert (row.job_id, row.attempts, row.due_at, row.host) == (
        job_id,
        1,
        T0 + timedelta(seconds=5),
        "agent.example.net",
    )
    old_attempt: Any = back.get_model("batch", "WebhookAttempt")  # with the fields it had then
    assert list(old_attempt.objects.values_list("job_id", "status")) == [(job_id, 503)]
