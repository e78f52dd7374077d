"""Numbered slot rows with leases: at most ``count`` holders at once, in any number of processes.

A slot row has a ``number`` primary key, a holder column that holds ``empty`` when the slot is
free, and ``lease_until``; a table may also name whose slot it is (a ``caller`` column). A slot is
free when it has no holder or its lease has run out (the holder's process died). Releasing is
conditional on the holder, so a holder whose lease ran out can never free a slot someone else
took since.

There are two ways in, one rule of what is free:

- ``take_free`` then ``hold``, inside the caller's own transaction: the lowest free row is locked
  with ``select_for_update(skip_locked=True)``, so takes never wait for one another (the worker
  slots of batch jobs, which claim a target in the same transaction);
- ``take``, in a short ``atomic()`` of its own: the same, and the holder's caller written beside
  it, so that a caller's slots can be counted deployment-wide (``held_by``). When the caller's
  ``share`` is bounded, every row is locked first, in number order, instead of the free one
  alone: the caller's slots are counted while no other take can change them, so the count is
  never stale and a caller never holds more than its share, whichever processes its takes come
  from.

On SQLite every transaction is ``BEGIN IMMEDIATE``, so takes are serialised anyway. Rows for the
configured count are made on demand: the count is a setting, and a deployment that raises it
must not wait for a migration to get the extra rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db import models, transaction
from django.db.models import Q

ANYONE = object()  # ``hold``'s default: whoever held the slot before


class Take(NamedTuple):
    """What a take got: a slot's number, or ``None``, and then whether the caller's share was full."""

    number: int | None
    at_share: bool = False


@dataclass(frozen=True)
class SlotTable:
    model: type[models.Model]
    holder: str  # the holder column, e.g. "target_id" or "holder"
    empty: object  # its value when the slot is free: None or ""
    caller: str | None = None  # the column naming whose slot it is, where the table has one
    # Other holder columns of the same rows (a worker slot holds a target or a monitor's run): a
    # slot is free only when every one is empty, and holding or freeing it empties the others.
    also: tuple[str, ...] = ()

    def take(
        self,
        count: int,
        holder: object,
        until: datetime,
        now: datetime,
        *,
        caller: str = "",
        share: int | None = None,
    ) -> Take:
        """Take the lowest free slot among the first ``count`` for ``holder`` (of ``caller``),
        leased ``until``, in a short transaction; none if all are held, or if ``caller`` already
        holds ``share`` slots whose leases have not run out (``at_share``)."""
        with transaction.atomic():
            if share is None:
                number = self.take_free(count, now)
            else:
                number, held = self._lock_all(count, caller, now)
                if held >= share:
                    return Take(None, at_share=True)
            if number is not None:
                self.hold(number, holder, until, caller=caller)
        return Take(number)

    def take_free(self, count: int, now: datetime) -> int | None:
        """Lock the lowest free slot among the first ``count`` and return its number, or ``None``.

        Call inside a transaction and ``hold`` the slot in the same one.
        """
        slot = self._first_free(count, now)
        if slot is None and self._manager().count() < count:
            self._make_rows(count)
            slot = self._first_free(count, now)
        return slot

    def hold(
        self, number: int, holder: object, until: datetime, *, instead_of: object = ANYONE, caller: str = ""
    ) -> bool:
        """Write ``holder`` (of ``caller``) and its lease ``until`` into slot ``number``: one
        ``take_free`` locked, or, if ``instead_of`` is given and still holds it, one that holder
        hands on (a holder that keeps its slot for its next piece of work). Whether the slot is
        now ``holder``'s."""
        slot = self._manager().filter(number=number)
        if instead_of is not ANYONE:
            slot = slot.filter(**{self.holder: instead_of})
        changes: dict[str, Any] = {self.holder: holder, "lease_until": until}
        changes.update(dict.fromkeys(self.also, self.empty))
        if self.caller is not None:
            changes[self.caller] = caller
        return bool(slot.update(**changes))

    def release(self, number: int, holder: object) -> bool:
        """Free slot ``number`` if ``holder`` still holds it."""
        return bool(self._manager().filter(number=number, **{self.holder: holder}).update(**self._free()))

    def release_held_by(self, holder: object) -> int:
        """Free whichever slot ``holder`` holds."""
        return int(self._manager().filter(**{self.holder: holder}).update(**self._free()))

    def held_by(self, caller: str, now: datetime) -> int:
        """How many slots ``caller`` holds whose leases have not run out, deployment-wide."""
        assert self.caller is not None, "only a table with a caller column knows whose slots they are"
        return self._manager().filter(**{self.caller: caller, "lease_until__gte": now}).count()

    def _lock_all(self, count: int, caller: str, now: datetime) -> tuple[int | None, int]:
        """Lock every row, in number order (two takes never wait on each other in a cycle); the
        lowest free among the first ``count``, and how many ``caller`` holds."""
        rows = self._rows_locked()
        if len(rows) < count:
            self._make_rows(count)
            rows = self._rows_locked()
        held = {
            number: who
            for number, holder, who, until in rows
            if holder != self.empty and until is not None and until >= now
        }
        free = [number for number, *_ in rows if number < count and number not in held]
        return (free[0] if free else None), sum(who == caller for who in held.values())

    def _rows_locked(self) -> list[tuple[Any, ...]]:
        assert self.caller is not None, "only a table with a caller column counts a caller's slots"
        locked = self._manager().select_for_update().order_by("number")
        return list(locked.values_list("number", self.holder, self.caller, "lease_until"))

    def _first_free(self, count: int, now: datetime) -> int | None:
        free = (
            self._manager()
            .select_for_update(skip_locked=True)
            .filter(number__lt=count)
            .filter(Q(**dict.fromkeys((self.holder, *self.also), self.empty)) | Q(lease_until__lt=now))
            .order_by("number")
        )
        number: int | None = free.values_list("number", flat=True).first()
        return number

    def _make_rows(self, count: int) -> None:
        self._manager().bulk_create([self.model(number=n) for n in range(count)], ignore_conflicts=True)

    def _free(self) -> dict[str, object]:
        freed: dict[str, object] = {self.holder: self.empty, "lease_until": None}
        freed.update(dict.fromkeys(self.also, self.empty))
        if self.caller is not None:
            freed[self.caller] = ""
        return freed

    def _manager(self) -> models.Manager[models.Model]:
        return self.model._default_manager
