"""One sitemap file, or one page's links, read for a map within the map's budget (docs/mapping.md).

Every request goes through the guarded client, takes its host's turn and a fetch slot, and is
kept in the document cache (sitemaps in a partition of their own beside the caller's, a page
with the caller's pages). A sitemap file may be at most ``SIFT_FETCH_MAX_BYTES`` on the wire and
``MAX_FILE_BYTES`` once its content coding and its own gzip are undone, by the client's
decompression rules (streaming, bounded as it goes); the bytes of every file of a map count
against ``MAP_BYTES``, the files against ``MAX_FILES``, and every step ends by the map's deadline.
The bytes are parsed in the sandbox child (``sitemap_parse.py``).

``read_sitemap`` and ``read_links`` answer a ``FileRead`` (entries, or the error that left the
file unread, with the reason the map is then incomplete) or raise ``Stop`` when the map must stop
reading altogether: its deadline, its files or its bytes are spent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings

from fetch import cache, client, gate
from fetch.errors import FetchError
from fetch.limits import MAX_URL_CHARS
from fetch.outcomes import Outcome
from fetch.politeness import host_turns
from fetch.sandbox import finish_line, pool
from fetch.wire import decoding

# The sitemaps protocol's own limits: 50 MB uncompressed and 50,000 URLs per file.
MAX_FILE_BYTES = 50 * 2**20
MAX_ENTRIES_PER_FILE = 50_000
# Files read for one map (sitemaps, indexes, the page), and their uncompressed bytes in all.
MAX_FILES = 50
MAP_BYTES = 100 * 2**20
# Sitemap fields beyond loc and lastmod (titles, captions) kept per URL, for search.
MAX_FIELD_CHARS = 300
# The longest answer of the sitemap reader, in characters of JSON.
MAX_REPLY_BYTES = 32 * 2**20
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
READER_HINT = "The site's sitemap is too large or too complex to read in time; narrow the map with include."


class Stop(Exception):
    """The map reads nothing more: ``reason`` is ``deadline``, ``files`` or ``bytes``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class Budget:
    """What is left of one map: its deadline (``time.monotonic()``), files and bytes."""

    deadline: float
    files: int
    bytes: int

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> None:
        """Raise ``Stop("deadline")`` once the deadline has passed (the decoder calls it too)."""
        if self.remaining() <= 0:
            raise Stop("deadline", "the map's deadline came")

    def take_file(self) -> None:
        self.check()
        if self.files <= 0:
            raise Stop("files", f"a map reads at most {MAX_FILES} files")
        self.files -= 1


@dataclass(frozen=True)
class Entry:
    url: str
    lastmod: str | None = None
    fields: str = ""


@dataclass
class FileRead:
    """A file as read: ``kind`` is ``urlset``, ``sitemapindex``, ``text`` or ``page``."""

    url: str
    kind: str = "sitemap"
    entries: list[Entry] = field(default_factory=list)
    error: str | None = None
    # Why the map is incomplete because of this file (a cap, or the file could not be read).
    reason: str | None = None
    outcome: Outcome | None = None


def read_sitemap(url: str, *, partition: str, caller: str, budget: Budget, delay: float) -> FileRead:
    """Download, un-gzip and parse one sitemap file (a URL set, an index or a text sitemap) for
    ``caller`` (whose fetch slot the download holds)."""
    budget.take_file()
    try:
        body = _sitemap_bytes(url, cache.kind_partition("sitemap", partition), caller, budget, delay)
        reply, data = _parse("sitemap", body, budget, {"max_field_chars": MAX_FIELD_CHARS})
    except _Unread as exc:
        return FileRead(url, error=exc.message, reason=exc.reason, outcome=exc.outcome)
    if "error" in reply:
        return FileRead(url, error=_parse_error(reply), reason="unreadable")
    entries = [Entry(str(loc), lastmod, fields or "") for loc, lastmod, fields in json.loads(data) if loc]
    return FileRead(url, str(reply["kind"]), entries, reason="file_cap" if reply.get("more") else None)


def read_links(url: str, *, partition: str, caller: str, budget: Budget, delay: float) -> FileRead:
    """Download one HTML page (with the caller's pages in the cache) and list its links."""
    budget.take_file()
    try:
        download = _download(url, partition, caller, budget, delay, limit=int(settings.SIFT_FETCH_MAX_BYTES))
        if download.content_type not in HTML_TYPES:
            raise _Unread("unreadable", "the page is not HTML, so it has no links to list")
        reply, data = _parse("links", download.body, budget, {"url": download.final_url})
    except _Unread as exc:
        return FileRead(url, "page", error=exc.message, reason=exc.reason, outcome=exc.outcome)
    hrefs = [Entry(str(href)) for href in json.loads(data)]
    return FileRead(url, "page", hrefs, reason="file_cap" if reply.get("more") else None)


class _Unread(Exception):
    def __init__(self, reason: str, message: str, outcome: Outcome | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.outcome = outcome


def _sitemap_bytes(url: str, partition: str, caller: str, budget: Budget, delay: float) -> bytes:
    if budget.bytes <= 0:
        raise Stop("bytes", f"the map's byte budget ({MAP_BYTES // 2**20} MiB uncompressed) is spent")
    limit = min(MAX_FILE_BYTES, budget.bytes)
    body = _download(url, partition, caller, budget, delay, limit=limit).body
    if len(body) > limit:  # a cached copy read under another map's budget
        raise _over_cap(limit)
    if body[:2] == b"\x1f\x8b":  # a .xml.gz file, served as it is stored
        try:
            body = decoding.decode(body, ["gzip"], limit, budget)
        except FetchError as exc:
            raise _over_cap(limit) if exc.outcome == Outcome.TOO_LONG else _unread(exc) from None
    budget.bytes -= len(body)
    return body


def _download(
    url: str, partition: str, caller: str, budget: Budget, delay: float, *, limit: int
) -> client.Download:
    """The answer for ``url``, from the cache when fresh, else downloaded now; a 2xx or ``_Unread``."""
    copy = cache.lookup(partition, url)
    if copy is not None and cache.is_fresh(copy):
        return cache.as_download(copy)
    by_map = False
    try:
        with _turn(url, budget, delay) as timeout, gate.fetch_slot(caller):
            by_map = timeout < float(settings.SIFT_FETCH_TIMEOUT)
            download = client.download(
                url,
                timeout=timeout,
                max_bytes=limit,
                max_wire_bytes=int(settings.SIFT_FETCH_MAX_BYTES),
            )
    except FetchError as exc:
        if exc.outcome == Outcome.TOO_LONG:
            raise _over_cap(limit) from None
        if exc.outcome == Outcome.TIMEOUT and by_map:
            raise Stop("deadline", "the map's deadline came during a download") from None
        raise _unread(exc) from None
    if not 200 <= download.status < 300:
        raise _Unread("unreadable", f"the site answered {download.status}", _status_outcome(download.status))
    if len(download.body) <= int(settings.SIFT_FETCH_MAX_BYTES):
        cache.store(partition, url, download)
    return download


@contextmanager
def _turn(url: str, budget: Budget, delay: float) -> Iterator[float]:
    """The host's turn (spaced by ``delay`` at least), waited for until the map's deadline; yield
    the download's timeout: the fetch deadline or what is left of the map, whichever is shorter."""
    budget.check()
    try:
        with host_turns.turn(url, since=None, wait=True, least=delay, until=budget.deadline):
            budget.check()
            yield min(float(settings.SIFT_FETCH_TIMEOUT), budget.remaining())
    except host_turns.HostNotDue:
        raise Stop("deadline", "the site's next turn comes after the map's deadline") from None


def _parse(op: str, body: bytes, budget: Budget, args: dict[str, object]) -> tuple[dict[str, object], str]:
    """Run the child's ``op`` on ``body``, by the map's deadline."""
    budget.check()
    seconds = budget.remaining()
    header: dict[str, object] = {
        "max_entries": MAX_ENTRIES_PER_FILE,
        "max_url_chars": MAX_URL_CHARS,
        "max_reply_chars": MAX_REPLY_BYTES // 4,  # UTF-8 takes at most 4 bytes a character
        **args,
    }
    try:
        with finish_line.finish_by(budget.deadline):
            reply, data = pool.get_sandbox().run(
                op,
                header,
                body,
                cpu_seconds=seconds,
                wall_seconds=seconds,
                subject="the sitemap reader",
                hint=READER_HINT,
                max_reply_bytes=MAX_REPLY_BYTES,
            )
    except FetchError as exc:
        if exc.outcome == Outcome.FILTER_TIMEOUT:  # the reader's time is what is left of the map
            raise Stop("deadline", "the map's deadline came while a file was read") from None
        raise _unread(exc) from None
    return reply, data.decode("utf-8")


def _parse_error(reply: dict[str, object]) -> str:
    if reply["error"] == "dtd":
        return "the file declares a DTD, which no sitemap needs; it was not read"
    if reply["error"] == "not_sitemap":
        return f"the file is XML but not a sitemap (its root is {reply.get('root')!r})"
    return "the file is neither an XML sitemap nor a list of URLs"


def _over_cap(limit: int) -> _Unread:
    if limit < MAX_FILE_BYTES:
        return _Unread("bytes", f"the map's byte budget ({MAP_BYTES // 2**20} MiB uncompressed) is spent")
    wire = int(settings.SIFT_FETCH_MAX_BYTES)
    return _Unread(
        "file_cap",
        f"the file is larger than {wire} bytes on the wire or {MAX_FILE_BYTES // 2**20} MiB uncompressed",
        Outcome.TOO_LONG,
    )


def _status_outcome(status: int) -> Outcome:
    if status in (429, 503):  # the site asks to slow down
        return Outcome.BUSY
    return Outcome.UPSTREAM_4XX if status < 500 else Outcome.UPSTREAM_5XX


def _unread(exc: FetchError) -> _Unread:
    return _Unread("unreadable", exc.message, exc.outcome)
