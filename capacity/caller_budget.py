"""One byte budget per caller, shared by rows of several tables: a caller's last readings (fetch)
and its monitors' changes (batch) count toward ``SIFT_CHANGES_BYTES_PER_CALLER`` together, and
storing either evicts the caller's oldest rows of either kind until the sum fits.

This layer knows neither table: each app registers its kind of row as it becomes ready (how to
find a caller's rows, which column says how old they are), and the app that owns the callers
registers how to lock one. A store calls ``hold`` first in its transaction, writes, then calls
``evict_oldest`` in the same transaction: two stores for one caller evict one after the other, so
they cannot both leave the sum over the budget, and the lock taken before any write cannot wait
in a cycle with another store's row locks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet, Sum


@dataclass(frozen=True)
class KeptRows:
    """A table whose rows count toward their caller's budget: ``rows_of(caller)`` are the caller's
    rows, each ``size`` bytes, the oldest first by ``at`` (then by primary key)."""

    name: str
    rows_of: Callable[[str], QuerySet[Any]]
    at: str
    size: str = "n_bytes"


KINDS: dict[str, KeptRows] = {}
CALLER_LOCKS: list[Callable[[str], None]] = []


def register(kind: KeptRows) -> None:
    """Count ``kind``'s rows toward their caller's budget (an app's ``ready``; again: replaced)."""
    KINDS[kind.name] = kind


def register_caller_lock(lock: Callable[[str], None]) -> None:
    """How to lock a caller by name until the transaction ends (the app that owns the callers)."""
    if lock not in CALLER_LOCKS:
        CALLER_LOCKS.append(lock)


def hold(caller: str) -> None:
    """Lock ``caller`` until the transaction ends: first in a store that then evicts."""
    for lock in CALLER_LOCKS:
        lock(caller)


def evict_oldest(caller: str, budget: int) -> int:
    """Delete the caller's oldest rows of every kind, oldest first whatever their kind, until
    their bytes add up to at most ``budget``; how many. Inside the store's transaction, after
    ``hold``; never touches another caller's rows."""
    excess = sum(_bytes(kind, caller) for kind in KINDS.values()) - budget
    if excess <= 0:
        return 0
    victims: dict[str, list[Any]] = {}
    for _at, name, pk, n_bytes in sorted(_oldest_first(caller)):
        if excess <= 0:
            break
        victims.setdefault(name, []).append(pk)
        excess -= n_bytes
    return sum(
        int(KINDS[name].rows_of(caller).filter(pk__in=pks).delete()[0]) for name, pks in victims.items()
    )


def _bytes(kind: KeptRows, caller: str) -> int:
    return int(kind.rows_of(caller).aggregate(total=Sum(kind.size))["total"] or 0)


def _oldest_first(caller: str) -> list[tuple[datetime, str, Any, int]]:
    """Every row of the caller, as (age, kind, primary key, bytes): a caller holds a few thousand
    at most (its readings' count bound and its monitors' last changes)."""
    rows: list[tuple[datetime, str, Any, int]] = []
    for name, kind in KINDS.items():
        found = kind.rows_of(caller).values_list(kind.at, "pk", kind.size)
        rows += [(at, name, pk, n_bytes) for at, pk, n_bytes in found]
    return rows
