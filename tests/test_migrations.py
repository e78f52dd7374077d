"""A database made by today's migrations upgrades to the latest ones with its data intact.

It is migrated back to batch ``0004_webhooks`` and fetch ``0003_host_turn`` (django-q2's own
latest), filled there through the historical models, then migrated to every app's latest
migration: the graph's leaf nodes, whatever they are named.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils.module_loading import import_string
from django_q.models import Schedule

from batch.models import ApiKey, BatchJob, BatchTarget, SubmitLock
from fetch.models import CachedDocument

pytestmark = pytest.mark.django_db(transaction=True)

TODAY = [("batch", "0004_webhooks"), ("fetch", "0003_host_turn")]
ROWS_MIGRATION = importlib.import_module("batch.migrations.0002_rows_and_schedules")
LEASE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
IDEM_KEY = "a" * 64


def _migrate(targets: list[tuple[str, str]] | None = None) -> Apps:
    """Migrate to ``targets`` (every leaf when ``None``); the models as they are there."""
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.fixture
def at_todays_migrations() -> Iterator[Apps]:
    """The database at today's migrations; at the latest again afterwards, whatever the test did."""
    try:
        yield _migrate(TODAY)
    finally:
        _migrate()


def _fill(apps: Apps) -> str:
    """A caller, a job with two targets and today's schedules, as today's code wrote them."""
    caller = apps.get_model("batch", "ApiKey").objects.create(name="old", key_sha256="b" * 64)
    old_job: Any = apps.get_model("batch", "BatchJob")  # with the fields it had then
    job = old_job.objects.create(
        id="c" * 32,
        caller=caller,
        caller_class="fleet",
        status="done",
        targets_total=2,
        targets_done=2,
        created_at=LEASE,
        finished_at=LEASE,
        lease=LEASE,
        idem_key=IDEM_KEY,
        n_bytes=7,
    )
    target = apps.get_model("batch", "BatchTarget")
    target.objects.create(job=job, idx=0, url="https://example.org/0", status="done", result={"content": "x"})
    target.objects.create(job=job, idx=1, url="https://example.org/1", status="done", result={"content": "y"})
    schedule = apps.get_model("django_q", "Schedule")
    for name, func, minutes in ROWS_MIGRATION.SCHEDULES:
        schedule.objects.update_or_create(
            name=name, defaults={"func": func, "schedule_type": "I", "minutes": minutes, "repeats": -1}
        )
    return job.id


def test_jobs_targets_and_callers_carry_over_with_their_renamed_fields(at_todays_migrations):
    job_id = _fill(at_todays_migrations)

    _migrate()

    job = BatchJob.objects.get(pk=job_id)
    assert job.last_read_at == LEASE
    assert job.content_key == IDEM_KEY
    assert job.caller == ApiKey.objects.get(name="old")
    assert (job.status, job.targets_done, job.n_bytes) == ("done", 2, 7)
    targets = BatchTarget.objects.filter(job=job).order_by("idx")
    assert [(t.url, t.result) for t in targets] == [
        ("https://example.org/0", {"content": "x"}),
        ("https://example.org/1", {"content": "y"}),
    ]


def test_the_submit_lock_is_one_row_after_the_upgrade(at_todays_migrations):
    assert at_todays_migrations.get_model("batch", "SubmitLock").objects.count() > 1

    _migrate()

    assert list(SubmitLock.objects.values_list("pk", flat=True)) == [1]


def test_every_schedule_names_a_callable_that_imports_after_the_upgrade(at_todays_migrations):
    _fill(at_todays_migrations)

    _migrate()

    funcs = list(Schedule.objects.values_list("func", flat=True))
    assert len(funcs) >= len(ROWS_MIGRATION.SCHEDULES)
    for func in funcs:
        assert callable(import_string(func)), func


def test_rendered_and_robots_copies_under_the_old_partition_names_are_dropped(at_todays_migrations):
    cached = at_todays_migrations.get_model("fetch", "CachedDocument")
    for n, partition in enumerate(["fleet", "restricted:alice", "fleet:rendered", "restricted:alice:robots"]):
        cached.objects.create(
            partition=partition, url=f"https://example.org/{n}", url_sha256=f"{n:064x}", final_url="",
            status=200, body=b"x", n_bytes=1, fetched_at=LEASE,
        )  # fmt: skip

    _migrate()

    assert set(CachedDocument.objects.values_list("partition", flat=True)) == {"fleet", "restricted:alice"}
