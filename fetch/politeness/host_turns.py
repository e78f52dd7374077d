"""Host turns: ``SIFT_FETCH_HOST_INTERVAL`` between two requests to one host, deployment-wide
(docs/politeness.md).

Each host has a row holding when its next request may go out (``HostTurn.next_at``). A fetch
takes the turn with a conditional update (``... WHERE next_at <= now``), so of two processes
asking at once only one gets it, on SQLite and PostgreSQL alike. When its request ends, the row
moves to at least that end plus the interval: the interval separates the end of one request
from the start of the next, as well as their starts.

Turns are kept per host as the network sees it, whatever the spelling: ``canonical_host`` maps
full-width letters, a trailing dot and the short forms of an IPv4 address to one name
(``fetch/wire/hostnames.py``), so a
caller cannot get turns of its own by spelling a host differently. They are not kept per
resolved address: many sites share one CDN address.

Only the top-level request of a fetch takes a turn: not its redirects, not a render's
subrequests, not robots.txt. A fetch for ``/v1/fetch`` waits for its turn within the first half
of the fetch deadline, or answers busy; a batch target never waits holding a worker: it raises
``HostNotDue`` and goes back to pending until its host's turn.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from fetch.errors import FetchError
from fetch.models import HostTurn
from fetch.outcomes import Outcome
from fetch.wire.hostnames import canonical_host

# A row this long past its turn says nothing any more; it goes when a new host's row is made.
FORGET_AFTER = timedelta(hours=1)
# Between two turns taken in the same instant by two processes, the loser asks this often again.
RETRY_SECONDS = 0.05


class HostNotDue(FetchError):
    """The host's turn is ``retry_after`` seconds away: a request now would come too soon after the last."""

    def __init__(self, due_in: float, *, waited_for: bool) -> None:
        super().__init__(
            Outcome.BUSY,
            f"sift spaces its requests to this site, and the next turn is {due_in:.1f} s away",
            f"Retry after {max(1, math.ceil(due_in))} seconds, or send the URLs as one batch: "
            "its targets wait for their turns without holding your request."
            if waited_for
            else "The target waits for its host's turn.",
            retry_after=due_in,
        )


def host_of(url: str) -> str:
    """What turns are kept for: the canonical host, whatever the scheme and port."""
    return canonical_host(urlsplit(url).hostname or "")


def interval() -> float:
    return float(settings.SIFT_FETCH_HOST_INTERVAL)


@contextmanager
def turn(
    url: str, *, since: float | None, wait: bool, least: float = 0.0, until: float | None = None
) -> Iterator[float | None]:
    """Hold ``url``'s host's turn for the block; yield the download's timeout.

    ``since`` is when the fetch's politeness began (its start, if robots.txt was read first),
    ``None`` if nothing came before the turn. The time spent since then comes out of the fetch
    deadline: the block gets what is left of ``SIFT_FETCH_TIMEOUT`` (``None``: all of it). With
    ``wait``, the fetch waits while its turn comes within the first half of the deadline (or by
    ``until``, a ``time.monotonic()`` value, when given); otherwise, or past that, ``HostNotDue``.
    ``least`` raises the interval for this request (a site's ``Crawl-delay``, for ``robots: true``).
    """
    seconds = max(interval(), least)
    if seconds <= 0:
        yield _left(since)
        return
    begin = time.monotonic() if since is None else since
    host = host_of(url)
    if wait and until is None:
        until = begin + float(settings.SIFT_FETCH_TIMEOUT) / 2
    _wait_for_turn(host, seconds, until if wait else None)
    try:
        yield _left(begin)
    finally:
        _end_turn(host, seconds)


def _left(since: float | None) -> float | None:
    if since is None:
        return None
    return max(0.01, float(settings.SIFT_FETCH_TIMEOUT) - (time.monotonic() - since))


def _wait_for_turn(host: str, seconds: float, until: float | None) -> None:
    while (due_in := take_turn(host, seconds)) > 0:
        if until is None or time.monotonic() + due_in > until:
            raise HostNotDue(due_in, waited_for=until is not None)
        time.sleep(due_in)


def take_turn(host: str, seconds: float, now: datetime | None = None) -> float:
    """Take ``host``'s turn now (``0.0``), or answer how many seconds away it is."""
    now = now or timezone.now()
    next_at = now + timedelta(seconds=seconds)
    with transaction.atomic():
        if HostTurn.objects.filter(host=host, next_at__lte=now).update(next_at=next_at):
            return 0.0
        row, created = HostTurn.objects.get_or_create(host=host, defaults={"next_at": next_at})
    if created:
        HostTurn.objects.filter(next_at__lt=now - FORGET_AFTER).delete()
        return 0.0
    # Due already: it came due between the update and the read; the next call takes it.
    return max((row.next_at - now).total_seconds(), RETRY_SECONDS)


def _end_turn(host: str, seconds: float) -> None:
    """The next turn comes no sooner than ``seconds`` after this request ended."""
    end = timezone.now() + timedelta(seconds=seconds)
    HostTurn.objects.filter(host=host, next_at__lt=end).update(next_at=end)
