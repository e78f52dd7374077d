"""Long answers in slices, and where a fetch starts reading (docs/api.md, "Slices and offsets").

An answer longer than ``max_chars`` (``FETCH_MAX_CHARS`` by default) is cut at the last heading
or paragraph boundary before the limit (else a line end, else a space) and carries
``next_cursor``: a token signed with ``SECRET_KEY`` naming where the next slice starts, the
document version (``content_sha256``) and a digest of the caller, the URL and the options it
belongs to. ``offset`` with ``version`` reads the whole text from an offset, cut exactly at
``max_chars`` (so that a span's start and length read back exactly what it cites). Either answers
``document_changed`` when the document read now is another version: the slices of two versions
never make one text.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing

from fetch.errors import FetchError
from fetch.extract import Extracted
from fetch.outcomes import Outcome
from fetch.targets import Target

CURSOR_SALT = "sift.fetch.cursor"
# Options that say where to start, how much to answer, how to reach the site, or what facts come
# beside the text: a cursor goes on whatever they are. Every other option changes the text.
UNBOUND_OPTIONS = frozenset(
    {"max_chars", "cursor", "offset", "version", "recover", "robots", "max_age", "structured", "tables"}
)
START_AGAIN = "Fetch the URL again without cursor to read it from the start."
# Where a slice may end, best first: before a heading, after a blank line, after a line, after a space.
_HEADING = re.compile(r"\n(?=#{1,6} )")
_PARAGRAPH = re.compile(r"\n[ \t\r]*\n")
_LINE = re.compile(r"\n")
_SPACE = re.compile(r"\s")


@dataclass(frozen=True)
class Start:
    """Where a fetch starts reading its answer, the document version it must find (if any), and
    whether its slice ends exactly at ``max_chars`` (an offset read) or at a boundary."""

    offset: int = 0
    version: str | None = None
    exact: bool = False


def start_of(target: Target, *, caller: str) -> Start:
    """The place ``target`` asks to read from: its cursor's (signed and bound to ``caller``, the
    URL and the options), its ``offset`` into ``version``, or the start. A cursor that was
    tampered with, or belongs to another caller, URL or options, is ``invalid_request``."""
    options = target.options
    if options.cursor is None:
        return Start(options.offset or 0, options.version, exact=options.offset is not None)
    try:
        place = signing.loads(options.cursor, salt=CURSOR_SALT)
    except signing.BadSignature:
        raise FetchError(
            Outcome.INVALID_REQUEST, "cursor is not one sift gave out, or it was changed", START_AGAIN
        ) from None
    if place.get("b") != _binding(target, caller):
        raise FetchError(
            Outcome.INVALID_REQUEST,
            "cursor belongs to another caller, URL or options",
            "Send the cursor with the URL and options of the fetch that answered it, as the same caller.",
        )
    return Start(int(place["o"]), str(place["v"]))


def answer(document: Extracted, target: Target, start: Start, *, caller: str) -> dict[str, Any]:
    """The envelope fields of the slice of ``document`` that starts at ``start``: ``content``,
    ``chars``, ``total_chars``, ``content_sha256``, ``next_cursor`` (unless it is the last one)
    and ``spans`` (with grep or question: those shown in this slice)."""
    version = document.content_sha256
    if start.version is not None and start.version != version:
        raise FetchError(
            Outcome.DOCUMENT_CHANGED,
            "the document is no longer the version the cursor or version names",
            Outcome.DOCUMENT_CHANGED.hint,
        )
    text = document.content
    if start.offset > len(text):
        raise FetchError(
            Outcome.INVALID_REQUEST,
            f"offset {start.offset} is past the end of the text, which has {len(text)} characters",
            f"Send an offset from 0 to {len(text)}.",
        )
    limit = target.options.max_chars or settings.SIFT_FETCH_MAX_CHARS
    end = min(len(text), start.offset + limit) if start.exact else slice_end(text, start.offset, limit)
    fields: dict[str, Any] = {
        "content": text[start.offset : end],
        "chars": end - start.offset,
        "total_chars": len(text),
        "content_sha256": version,
    }
    if end < len(text):
        place = {"o": end, "v": version, "b": _binding(target, caller)}
        fields["next_cursor"] = signing.dumps(place, salt=CURSOR_SALT)
    if document.tables is not None:  # those that start in this slice; all of a narrowed text's
        narrowed = document.spans is not None
        fields["tables"] = [
            table for table in document.tables if narrowed or start.offset <= table["start"] < end
        ]
    if document.spans is not None:
        fields["spans"] = [
            {"start": span.start, "end": span.end, **({"page": span.page} if span.page is not None else {})}
            for span in document.spans
            if start.offset <= span.at < end
        ]
    return fields


def slice_end(text: str, start: int, limit: int) -> int:
    """Where the slice of ``text`` from ``start`` ends: the whole rest if it fits in ``limit``,
    else at the last heading or paragraph boundary within it, else a line end, else a space
    (never inside a word); a run with no space at all is cut at the limit."""
    if len(text) - start <= limit:
        return len(text)
    # A few characters past the limit, so that a boundary right at it (a heading's "# ") is seen.
    window = text[start : start + limit + 8]
    for boundary in ((_HEADING, _PARAGRAPH), (_LINE,), (_SPACE,)):
        best = max(_last_end(pattern, window, limit) for pattern in boundary)
        if best > 0:
            return start + best
    return start + limit


def _last_end(pattern: re.Pattern[str], window: str, limit: int) -> int:
    """The end of the last match of ``pattern`` in ``window`` that ends within ``limit``, else 0."""
    last = 0
    for match in pattern.finditer(window):
        if match.end() > limit:
            break
        last = match.end()
    return last


def _binding(target: Target, caller: str) -> str:
    """What a cursor belongs to: the caller, the URL and the options that shape the text."""
    options = {k: v for k, v in target.options.to_dict().items() if k not in UNBOUND_OPTIONS}
    bound = json.dumps([caller, target.url, options], sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(bound.encode()).hexdigest()[:32]
