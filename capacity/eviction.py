"""Oldest first (or in another order a table gives) until a byte budget is met: which rows to
delete, whatever the table."""

from __future__ import annotations

import threading
from typing import Any

from django.db.models import QuerySet, Sum

CHUNK_ROWS = 500


def oldest_over_budget(
    stored: QuerySet[Any], oldest_first: QuerySet[Any], budget: int, size: str = "n_bytes"
) -> list[Any]:
    """Primary keys from ``oldest_first``, in its order, whose deletion brings ``stored`` within ``budget``.

    ``stored`` is everything that counts toward the budget; ``oldest_first`` is what may go, in
    the order it goes. What counts but may not go (a live job) is never picked, even when it
    alone is over the budget: then everything that may go is picked.
    """
    return first_to_cover(oldest_first, excess_over(stored, budget, size), size)


def excess_over(stored: QuerySet[Any], budget: int, size: str = "n_bytes") -> int:
    """How many bytes ``stored`` holds beyond ``budget`` (0 or less: none)."""
    return int(stored.aggregate(total=Sum(size))["total"] or 0) - budget


def first_to_cover(oldest_first: QuerySet[Any], excess: int, size: str = "n_bytes") -> list[Any]:
    """Primary keys from ``oldest_first``, in its order (oldest first, or another the table's owner
    makes, such as the finished jobs' fair turns), until their sizes add up to ``excess``."""
    victims: list[Any] = []
    if excess <= 0:
        return victims
    for pk, n_bytes in oldest_first.values_list("pk", size).iterator(chunk_size=CHUNK_ROWS):
        if excess <= 0:
            break
        victims.append(pk)
        excess -= n_bytes
    return victims


# A budget is checked once a process has stored this share of it since its last check.
CHECK_SHARE = 64


class UncheckedBytes:
    """The bytes this process stored since it last summed a table against its byte budget.

    Summing after every store would scan the table per store; instead a store asks ``check_due``,
    which says yes once ``1/CHECK_SHARE`` of the budget has been stored since the last yes (or
    when the caller has another reason to check), so the budget is overshot by at most that share
    per process between checks.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0

    def check_due(self, n_bytes: int, budget: int, *, anyway: bool = False) -> bool:
        with self.lock:
            self.count += n_bytes
            if not anyway and self.count * CHECK_SHARE < budget:
                return False
            self.count = 0
            return True
