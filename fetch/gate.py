"""The fetch gate: at most ``SIFT_FETCH_SLOTS`` upstream fetches in flight, deployment-wide, and
at most a caller's share of them for any one caller.

Slots are rows, so web workers and cluster workers in any number of processes share them. A
fetch waits up to ``GATE_WAIT_SECONDS`` for a free row, then fails busy. A slot's lease outlasts
one download; a process that dies holding one leaves it to expire, and then it is free again.
A slot row names the caller it fetches for, and a take counts the caller's live rows under the
same locks: a caller that holds its share (``SIFT_FETCH_PER_CALLER``) is refused busy at once,
whichever processes its fetches, maps, renders and batch targets run in. The rows are taken and
released by the one slot algorithm (``capacity.slots``), as the worker slots of batch jobs are,
and made on demand for the configured count, so raising ``SIFT_FETCH_SLOTS`` needs no migration.
The render slots (``fetch.render.renderer``) are a ``Gate`` too. See docs/fetch-pipeline.md.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from capacity.slots import SlotTable
from fetch.errors import FetchError
from fetch.limits import GATE_WAIT_SECONDS
from fetch.models import FetchSlot
from fetch.outcomes import Outcome, RetryAfter

POLL_SECONDS = 0.05
LEASE_MARGIN_SECONDS = 5.0
FETCH_SLOTS = SlotTable(FetchSlot, holder="holder", empty="", caller="caller")


@dataclass(frozen=True)
class Gate:
    """At most ``count()`` holders of ``table``'s slots at once, deployment-wide; a holder waits
    up to ``GATE_WAIT_SECONDS`` for one, then is refused busy."""

    table: SlotTable
    count: Callable[[], int]
    share: Callable[[], int | None]  # a caller's slots at once; None: no share of its own
    what: str  # "fetch", "render": how the busy error names the slots
    retry_after: int

    @contextmanager
    def slot(self, caller: str, lease_seconds: float) -> Iterator[int]:
        """Hold one slot for ``caller`` for the block; its lease outlasts the work, so a dead
        holder's slot frees."""
        token = secrets.token_hex(16)
        number = self._wait(token, caller, lease_seconds)
        try:
            yield number
        finally:
            self.table.release(number, token)

    def _wait(self, token: str, caller: str, lease_seconds: float) -> int:
        deadline = time.monotonic() + GATE_WAIT_SECONDS
        while True:
            now = timezone.now()
            until = now + timedelta(seconds=lease_seconds)
            share = self.share()
            taken = self.table.take(self.count(), token, until, now, caller=caller, share=share)
            if taken.number is not None:
                return taken.number
            if taken.at_share:
                # At once: only the caller's own work ending frees its share.
                raise FetchError(
                    Outcome.BUSY,
                    f"you already hold {share} of the {self.what} slots, as many as one caller may",
                    "Wait for one of your fetches, maps, renders or batch targets to end; "
                    f"retry after {self.retry_after} seconds.",
                    retry_after=self.retry_after,
                )
            if time.monotonic() >= deadline:
                raise FetchError(
                    Outcome.BUSY,
                    f"all {self.count()} {self.what} slots stayed busy for {GATE_WAIT_SECONDS:.0f}s",
                    f"sift is doing as much of this as it may; retry after {self.retry_after} seconds.",
                    retry_after=self.retry_after,
                )
            time.sleep(POLL_SECONDS)


FETCH_GATE = Gate(
    FETCH_SLOTS,
    lambda: settings.SIFT_FETCH_SLOTS,
    lambda: settings.SIFT_FETCH_PER_CALLER,  # a caller's share, counted deployment-wide
    "fetch",
    RetryAfter.FETCH,
)


def slot_lease() -> timedelta:
    return timedelta(seconds=settings.SIFT_FETCH_TIMEOUT + LEASE_MARGIN_SECONDS)


def fetch_slot(caller: str, lease_seconds: float | None = None) -> AbstractContextManager[int]:
    """Hold one fetch slot for ``caller`` for the block (for one download unless
    ``lease_seconds`` says longer, as a render does); raise ``FetchError("busy")`` if none frees
    up in time."""
    return FETCH_GATE.slot(
        caller, lease_seconds if lease_seconds is not None else slot_lease().total_seconds()
    )
