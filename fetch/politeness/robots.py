"""robots.txt, for targets that ask ``robots: true`` (docs/politeness.md).

The file is fetched through the guarded client (a smaller size cap and a shorter deadline than a
page), kept in the document cache in a partition of its own beside the caller's, and read with
Protego for the product token ``sift`` (``ROBOT_NAME``). The usual convention decides what an
answer means: a 2xx is read; a 4xx (but 429) means the site has no rules; a 429, a 5xx, a 304
(which answers only a conditional request), an unreachable site, a timeout or an oversized file
mean nothing may be fetched until robots.txt can be read.
"""

from __future__ import annotations

import dataclasses
import math
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from protego import Protego

from fetch import cache, client, guard
from fetch.errors import FetchError
from fetch.outcomes import Outcome
from fetch.wire import hostnames

# What the groups of a robots.txt are matched against: the product token of sift's User-Agent.
ROBOT_NAME = client.USER_AGENT.split("/", 1)[0]
# Larger than the 500 KiB the robots.txt standard asks crawlers to read.
MAX_BYTES = 512 * 1024
TIMEOUT_SECONDS = 5.0
# A site's Crawl-delay counts up to this long: a larger one would stall every request to it.
MAX_CRAWL_DELAY = 60.0
DISALLOWED_HINT = (
    "The site's robots.txt asks sift (or every crawler) not to fetch this path; "
    "choose another page, or fetch without robots: true if the site's owner allows it."
)
UNREADABLE_HINT = (
    "The site's robots.txt could not be read (a server error, a 429, a timeout or no answer), "
    "and an unreadable robots.txt disallows everything; retry later."
)


def robots_url(url: str) -> str:
    """The robots.txt that governs ``url``: same scheme, host and port, spelled one way for each
    site (the canonical host, no default port), so every spelling of a site shares one copy."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = hostnames.canonical_host(parts.hostname or "")
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None and parts.port != guard.DEFAULT_PORTS.get(scheme):
        netloc += f":{parts.port}"
    return urlunsplit((scheme, netloc, "/robots.txt", "", ""))


def partition_of(partition: str) -> str:
    """Where robots.txt answers of ``partition`` live: apart from the pages of the same sites."""
    return cache.kind_partition("robots", partition)


def check(url: str, partition: str) -> float:
    """Raise ``blocked`` unless the site's robots.txt lets ``sift`` fetch ``url``; answer the
    site's crawl delay (``crawl_delay``), the least interval of its ``robots: true`` requests."""
    found = rules(url, partition)
    if not found.can_fetch(url, ROBOT_NAME):
        raise FetchError(
            Outcome.BLOCKED, "the site's robots.txt disallows this URL for sift", DISALLOWED_HINT
        )
    return crawl_delay(found)


def crawl_delay(found: Protego) -> float:
    """The ``Crawl-delay`` of the group for ``sift`` (or ``*``) in seconds, at most
    ``MAX_CRAWL_DELAY``; 0 when the site names none."""
    delay = found.crawl_delay(ROBOT_NAME)
    if delay is None or not math.isfinite(delay) or delay <= 0:
        return 0.0
    return min(float(delay), MAX_CRAWL_DELAY)


def timeout() -> float:
    """robots.txt may use at most half the fetch deadline; the page needs the rest."""
    return min(TIMEOUT_SECONDS, float(settings.SIFT_FETCH_TIMEOUT) / 2)


def rules(url: str, partition: str) -> Protego:
    """The rules of ``url``'s site, from the cache or read now; ``blocked`` when unreadable."""
    where, kept_in = robots_url(url), partition_of(partition)
    copy = cache.lookup(kept_in, where)
    if copy is not None and cache.is_fresh(copy):
        return _parse(copy.status, bytes(copy.body))
    # A site the guard refuses is refused as any target of it would be, not for its robots.txt.
    guard.check_url(where)
    try:
        answer = client.download(where, timeout=timeout(), max_bytes=MAX_BYTES)
    except FetchError as exc:
        raise _unreadable(exc.message) from None
    # A 304 answers only a conditional request, which this is not: the site is misbehaving.
    if answer.status in (304, 429) or answer.status >= 500:
        raise _unreadable(f"it answered {answer.status}")
    if not 200 <= answer.status < 300:
        answer = dataclasses.replace(answer, body=b"", headers={})
    cache.store(kept_in, where, answer, any_answer=True)
    return _parse(answer.status, answer.body)


def _parse(status: int, body: bytes) -> Protego:
    """The rules of a 2xx answer; no rules at all for a 4xx (or a redirect that led nowhere)."""
    text = body.decode("utf-8", "replace") if 200 <= status < 300 else ""
    return Protego.parse(text)


def _unreadable(why: str) -> FetchError:
    return FetchError(
        Outcome.BLOCKED,
        f"the site's robots.txt could not be read ({why}), so sift fetches nothing from the site",
        UNREADABLE_HINT,
    )
