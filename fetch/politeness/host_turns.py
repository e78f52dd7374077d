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

A site's ``Crawl-delay`` binds only the ``robots: true`` requests that read it: they take a second
turn, kept in a row of its own for the host (``crawl_delay_key``), spaced by the delay, besides
the host's shared turn spaced by the interval; a request without ``robots: true`` never sees it.

Only the top-level request of a fetch takes a turn: not its redirects, not a render's
subrequests, not robots.txt. A fetch for ``/v1/fetch`` waits for its turn within the first half
of the fetch deadline, or answers busy; a batch target never waits holding a worker: it raises
``HostNotDue`` and goes back to pending until its host's turn.
"""

from __future__ import annotations

import hashlib
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
    ``least`` is the site's ``Crawl-delay`` for a ``robots: true`` request: when it is longer than
    the interval, the request also takes the host's crawl-delay turn, which only such requests
    share, so the delay never holds back the host's other callers.
    """
    spacings = [(key, seconds) for key, seconds in _spacings(host_of(url), least) if seconds > 0]
    if not spacings:
        yield _left(since)
        return
    begin = time.monotonic() if since is None else since
    if wait and until is None:
        until = begin + float(settings.SIFT_FETCH_TIMEOUT) / 2
    taken: list[tuple[str, float, datetime]] = []
    try:
        for key, seconds in spacings:
            taken.append((key, seconds, _wait_for_turn(key, seconds, until if wait else None)))
    except HostNotDue:
        for key, _, next_at in taken:
            _give_back(key, next_at)  # no request went out in that turn
        raise
    try:
        yield _left(begin)
    finally:
        for key, seconds, _ in taken:
            _end_turn(key, seconds)


def _spacings(host: str, least: float) -> list[tuple[str, float]]:
    """The turns a request to ``host`` takes, in order: its crawl-delay turn when it obeys a
    ``Crawl-delay`` longer than the interval, then the host's own (the interval). The crawl-delay
    turn comes first, so that waiting for it holds no turn the host's other callers need."""
    own = (host, interval())
    return [(crawl_delay_key(host), least), own] if least > own[1] else [own]


def crawl_delay_key(host: str) -> str:
    """The row of ``host``'s crawl-delay turn: no host name holds a space, so it is never a host's
    own row; a name too long for the key is hashed, so no two hosts ever share one."""
    key = f"robots {host}"
    if len(key) <= (HostTurn._meta.get_field("host").max_length or 0):
        return key
    return f"robots sha256:{hashlib.sha256(host.encode()).hexdigest()}"


def _left(since: float | None) -> float | None:
    if since is None:
        return None
    return max(0.01, float(settings.SIFT_FETCH_TIMEOUT) - (time.monotonic() - since))


def _wait_for_turn(key: str, seconds: float, until: float | None) -> datetime:
    """Take ``key``'s turn, waiting for it until ``until``; answer the ``next_at`` it set."""
    while True:
        now = timezone.now()
        due_in = take_turn(key, seconds, now)
        if due_in <= 0:
            return now + timedelta(seconds=seconds)
        if until is None or time.monotonic() + due_in > until:
            raise HostNotDue(due_in, waited_for=until is not None)
        time.sleep(due_in)


def _give_back(key: str, next_at: datetime) -> None:
    """A turn taken for a request that never went out is due again, unless another took it since."""
    HostTurn.objects.filter(host=key, next_at=next_at).update(next_at=timezone.now())


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
