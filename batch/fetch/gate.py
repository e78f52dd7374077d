"""The fetch gate (SPEC §5.5): at most ``FETCH_SLOTS`` upstream fetches in flight, deployment-wide.

Slots are rows, so web workers and cluster workers in any number of processes share them. A
fetch waits up to ``GATE_WAIT_SECONDS`` for a free row, then fails busy. A slot's lease outlasts
one download; a process that dies holding one leaves it to expire, and then it is free again.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from batch.fetch.errors import FetchError
from batch.fetch.models import FetchSlot
from batch.fetch.outcomes import Outcome, RetryAfter

GATE_WAIT_SECONDS = 5.0
POLL_SECONDS = 0.05
LEASE_MARGIN_SECONDS = 5.0


def slot_lease() -> timedelta:
    return timedelta(seconds=settings.SIFT_FETCH_TIMEOUT + LEASE_MARGIN_SECONDS)


@contextmanager
def fetch_slot() -> Iterator[int]:
    """Hold one slot for the duration of the block; raise ``FetchError("busy")`` if none frees up."""
    token = secrets.token_hex(16)
    number = _wait_for_slot(token)
    try:
        yield number
    finally:
        FetchSlot.objects.filter(number=number, holder=token).update(holder="", lease_until=None)


def _wait_for_slot(token: str) -> int:
    deadline = time.monotonic() + GATE_WAIT_SECONDS
    while True:
        number = _try_take(token)
        if number is not None:
            return number
        if time.monotonic() >= deadline:
            raise FetchError(
                Outcome.BUSY,
                f"all {settings.SIFT_FETCH_SLOTS} fetch slots stayed busy for {GATE_WAIT_SECONDS:.0f}s",
                f"sift is fetching as much as it may; retry after {RetryAfter.FETCH} seconds.",
                retry_after=RetryAfter.FETCH,
            )
        time.sleep(POLL_SECONDS)


def _try_take(token: str) -> int | None:
    now = timezone.now()
    with transaction.atomic():
        free = (
            FetchSlot.objects.select_for_update(skip_locked=True)
            .filter(number__lt=settings.SIFT_FETCH_SLOTS)
            .filter(Q(holder="") | Q(lease_until__lt=now))
            .order_by("number")
        )
        slot = free.first()
        if slot is None and FetchSlot.objects.count() < settings.SIFT_FETCH_SLOTS:
            FetchSlot.objects.bulk_create(
                [FetchSlot(number=n) for n in range(settings.SIFT_FETCH_SLOTS)], ignore_conflicts=True
            )
            slot = free.first()
        if slot is None:
            return None
        FetchSlot.objects.filter(number=slot.number).update(holder=token, lease_until=now + slot_lease())
    return slot.number
