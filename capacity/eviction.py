"""Oldest first until a byte budget is met: which rows to delete, whatever the table."""

from __future__ import annotations

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
    excess = (stored.aggregate(total=Sum(size))["total"] or 0) - budget
    victims: list[Any] = []
    if excess <= 0:
        return victims
    for pk, n_bytes in oldest_first.values_list("pk", size).iterator(chunk_size=CHUNK_ROWS):
        if excess <= 0:
            break
        victims.append(pk)
        excess -= n_bytes
    return victims
