"""The fetch gate: at most ``SIFT_FETCH_SLOTS`` upstream fetches in flight, deployment-wide.

Slots are rows, so web workers and cluster workers in any number of processes share them. A
fetch waits up to ``GATE_WAIT_SECONDS`` for a free row, then fails busy. A slot's lease outlasts
one download; a process that dies holding one leaves it to expire, and then it is free again.
The rows are taken and released as the worker slots of batch jobs are (``capacity.slots``), and
made on demand for the configured count, so raising ``SIFT_FETCH_SLOTS`` needs no migration.
See docs/fetch-pipeline.md.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections, router, transaction
from django.db.models import Field
from django.utils import timezone

from capacity.slots import SlotTable
from fetch.errors import FetchError
from fetch.limits import GATE_WAIT_SECONDS
from fetch.models import FetchSlot
from fetch.outcomes import Outcome, RetryAfter

POLL_SECONDS = 0.05
LEASE_MARGIN_SECONDS = 5.0
FETCH_SLOTS = SlotTable(FetchSlot, holder="holder", empty="")
# An UPDATE's FROM clause that makes its own transaction commit without waiting for the disk, on
# PostgreSQL: set_config(..., true) lasts until the end of that transaction, the statement's commit.
ASYNCHRONOUS_COMMIT = " FROM (SELECT set_config('synchronous_commit', 'off', true)) AS asynchronous"


@dataclass(frozen=True)
class Gate:
    """At most ``count()`` holders of ``table``'s slots at once, deployment-wide; a holder waits
    up to ``GATE_WAIT_SECONDS`` for one, then is refused busy."""

    table: SlotTable
    count: Callable[[], int]
    what: str  # "fetch", "render": how the busy error names the slots
    retry_after: int

    @contextmanager
    def slot(self, lease_seconds: float) -> Iterator[int]:
        """Hold one slot for the block; its lease outlasts the work, so a dead holder's slot frees."""
        token = secrets.token_hex(16)
        number = self._wait(token, lease_seconds)
        try:
            yield number
        finally:
            release_without_waiting(self.table, number, token)

    def _wait(self, token: str, lease_seconds: float) -> int:
        deadline = time.monotonic() + GATE_WAIT_SECONDS
        while (number := self._try_take(token, lease_seconds)) is None:
            if time.monotonic() >= deadline:
                raise FetchError(
                    Outcome.BUSY,
                    f"all {self.count()} {self.what} slots stayed busy for {GATE_WAIT_SECONDS:.0f}s",
                    f"sift is doing as much of this as it may; retry after {self.retry_after} seconds.",
                    retry_after=self.retry_after,
                )
            time.sleep(POLL_SECONDS)
        return number

    def _try_take(self, token: str, lease_seconds: float) -> int | None:
        now = timezone.now()
        lease_until = now + timedelta(seconds=lease_seconds)
        number = take_at_once(self.table, self.count(), token, now, lease_until)
        if number is not None:
            return number
        # None free, or fewer rows than slots (the count was raised): the table's own way, which
        # makes the missing rows.
        with transaction.atomic():
            number = self.table.take_free(self.count(), now)
            if number is not None:
                self.table.hold(number, token, lease_until)
        return number


def take_at_once(
    table: SlotTable, count: int, token: str, now: datetime, lease_until: datetime
) -> int | None:
    """Take the lowest free slot among the first ``count`` for ``token`` in one statement, or ``None``.

    The same rows as ``SlotTable.take_free`` then ``hold``, without a transaction around them:
    one ``UPDATE ... RETURNING`` whose subquery locks the row it picks (``FOR UPDATE SKIP
    LOCKED`` on PostgreSQL; SQLite runs one writer at a time anyway). Every fetch takes a slot,
    so one round trip rather than a transaction of several is saved on every fetch. Outside a
    caller's transaction on PostgreSQL its commit does not wait for the disk either (as a
    release's): other processes see the take at once, so the count holds; only a database crash
    can lose it (docs/decisions.md).
    """
    meta = table.model._meta
    connection = connections[router.db_for_write(table.model)]
    quote, ops = connection.ops.quote_name, connection.ops

    def column(field: str) -> str:
        found = meta.get_field(field)
        assert isinstance(found, Field)
        return quote(str(found.column))

    name, holder, number, lease = (
        quote(meta.db_table),
        column(table.holder),
        column("number"),
        column("lease_until"),
    )
    is_free = f"{holder} IS NULL" if table.empty is None else f"{holder} = %s"
    lock = " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    without_waiting = connection.vendor == "postgresql" and not connection.in_atomic_block
    asynchronous = ASYNCHRONOUS_COMMIT if without_waiting else ""
    # Names from the model's metadata, quoted; every value a parameter.
    sql = (
        f"UPDATE {name} SET {holder} = %s, {lease} = %s{asynchronous} WHERE {number} = ("  # noqa: S608
        f"SELECT {number} FROM {name} WHERE {number} < %s AND ({is_free} OR {lease} < %s)"
        f" ORDER BY {number} LIMIT 1{lock}) RETURNING {number}"
    )
    empty = [] if table.empty is None else [table.empty]
    params: list[Any] = [
        token,
        ops.adapt_datetimefield_value(lease_until),
        count,
        *empty,
        ops.adapt_datetimefield_value(now),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def release_without_waiting(table: SlotTable, number: int, token: str) -> None:
    """Free slot ``number`` if ``token`` still holds it; on PostgreSQL, without waiting for the
    commit to reach the disk (outside a caller's transaction).

    A release a database crash loses leaves the slot to its lease, as a holder that died does;
    the fetch does not wait on a disk flush for it. Takes stay synchronous: the count must hold.
    """
    connection = connections[router.db_for_write(table.model)]
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        table.release(number, token)
        return
    meta = table.model._meta
    quote = connection.ops.quote_name
    name, holder = quote(meta.db_table), quote(_column(table, table.holder))
    number_column, lease = quote(_column(table, "number")), quote(_column(table, "lease_until"))
    empty = "NULL" if table.empty is None else "%s"
    sql = (
        f"UPDATE {name} SET {holder} = {empty}, {lease} = NULL{ASYNCHRONOUS_COMMIT}"  # noqa: S608 — quoted model names
        f" WHERE {number_column} = %s AND {holder} = %s"
    )
    params: list[Any] = [*([] if table.empty is None else [table.empty]), number, token]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _column(table: SlotTable, field: str) -> str:
    found = table.model._meta.get_field(field)
    assert isinstance(found, Field)
    return str(found.column)


FETCH_GATE = Gate(FETCH_SLOTS, lambda: settings.SIFT_FETCH_SLOTS, "fetch", RetryAfter.FETCH)


def slot_lease() -> timedelta:
    return timedelta(seconds=settings.SIFT_FETCH_TIMEOUT + LEASE_MARGIN_SECONDS)


def fetch_slot(lease_seconds: float | None = None) -> AbstractContextManager[int]:
    """Hold one fetch slot for the block (for one download unless ``lease_seconds`` says longer,
    as a render does); raise ``FetchError("busy")`` if none frees up in time."""
    return FETCH_GATE.slot(lease_seconds if lease_seconds is not None else slot_lease().total_seconds())
