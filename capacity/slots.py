"""Numbered slot rows with leases: at most ``count`` holders at once, in any number of processes.

A slot row has a ``number`` primary key, a holder column that holds ``empty`` when the slot is
free, and ``lease_until``. A slot is free when it has no holder or its lease has run out (the
holder's process died). Taking one locks the lowest free row with ``SELECT ... FOR UPDATE SKIP
LOCKED`` inside the caller's transaction; on SQLite every transaction is ``BEGIN IMMEDIATE``, so
takes are serialised anyway. Releasing is conditional on the holder, so a holder whose lease
ran out can never free a slot someone else took since.

Rows for the configured count are made on demand: the count is a setting, and a deployment that
raises it must not wait for a migration to get the extra rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, models
from django.db.models import Q


@dataclass(frozen=True)
class SlotTable:
    model: type[models.Model]
    holder: str  # the holder column, e.g. "target_id" or "holder"
    empty: object  # its value when the slot is free: None or ""

    def take_free(self, count: int, now: datetime) -> int | None:
        """Lock the lowest free slot among the first ``count`` and return its number, or ``None``.

        Call inside a transaction and ``hold`` the slot in the same one.
        """
        slot = self._first_free(count, now)
        if slot is None and self._manager().count() < count:
            self._manager().bulk_create([self.model(number=n) for n in range(count)], ignore_conflicts=True)
            slot = self._first_free(count, now)
        return slot

    def hold(self, number: int, holder: object, lease_until: datetime) -> None:
        with connection.cursor() as cursor:
            cursor.execute(*self.hold_statement(number, holder, lease_until))

    def hold_statement(self, number: int, holder: object, lease_until: datetime) -> tuple[str, list[Any]]:
        """The plain ``UPDATE`` of ``hold`` and its values, for a caller that sends it its own way.

        A worker holds a slot for every target it claims: the ORM's building and compiling of
        this one statement cost more than the database's work on it. The worker sends it through
        its prepared cursor, or as part of a larger statement (``batch/worker.py``): it ends with
        its ``WHERE`` clause, so that a caller may add a condition.
        """
        q = connection.ops.quote_name
        meta = self.model._meta
        holder_field = meta.get_field(self.holder)
        assert isinstance(holder_field, models.Field)
        # Names come from the model, values are parameters.
        sql = (
            f"UPDATE {q(meta.db_table)} SET {q(str(holder_field.column))} = %s, {q('lease_until')} = %s "  # noqa: S608
            f"WHERE {q('number')} = %s"
        )
        values = [
            holder_field.get_db_prep_save(holder, connection),
            connection.ops.adapt_datetimefield_value(lease_until),
            number,
        ]
        return sql, values

    def release(self, number: int, holder: object) -> bool:
        """Free slot ``number`` if ``holder`` still holds it."""
        return bool(self._manager().filter(number=number, **{self.holder: holder}).update(**self._free()))

    def release_held_by(self, holder: object) -> int:
        """Free whichever slot ``holder`` holds (a claim recovered without knowing its slot)."""
        return int(self._manager().filter(**{self.holder: holder}).update(**self._free()))

    def _first_free(self, count: int, now: datetime) -> int | None:
        free = (
            self._manager()
            .select_for_update(skip_locked=True)
            .filter(number__lt=count)
            .filter(Q(**{self.holder: self.empty}) | Q(lease_until__lt=now))
            .order_by("number")
        )
        number: int | None = free.values_list("number", flat=True).first()
        return number

    def _free(self) -> dict[str, object]:
        return {self.holder: self.empty, "lease_until": None}

    def _manager(self) -> models.Manager[models.Model]:
        return self.model._default_manager
