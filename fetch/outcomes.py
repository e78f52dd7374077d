"""The one table of outcomes: why a fetch or a batch target failed, with its HTTP status and hint.

``/v1/fetch`` answers an outcome's status with the outcome as its code; a batch target stores
the outcome; the worker, the admin and the MCP tools use the same members (docs/api.md).
This module also holds the one busy policy: how long a caller refused busy waits.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import cast


class Outcome(StrEnum):
    """A failure's outcome; ``http_status`` is what ``/v1/fetch`` answers, ``hint`` the default hint."""

    _value_: str
    http_status: int
    hint: str

    def __new__(cls, value: str, http_status: int, hint: str) -> Outcome:
        member = str.__new__(cls, value)
        member._value_ = value
        member.http_status = http_status
        member.hint = hint
        return member

    @classmethod
    def of(cls, code: object) -> Outcome:
        """The outcome whose code is ``code``; ``ValueError`` for anything outside the table."""
        member = cls._value2member_map_.get(code) if isinstance(code, str) else None
        if member is None:
            raise ValueError(f"unknown outcome {code!r}")
        return cast(Outcome, member)

    INVALID_REQUEST = "invalid_request", 400, "Check the URL and its options against /v1/docs."
    BLOCKED = "blocked", 403, "sift fetches only public http(s) addresses; send another URL."
    UNSUPPORTED = (
        "unsupported",
        415,
        "sift reads HTML, PDF, JSON, text, office documents (DOCX, XLSX, PPTX, ODT, ODS, ODP), EPUB, "
        "RTF, CSV and feeds; send one of them.",
    )
    TOO_LONG = (
        "too_long",
        422,
        "The document is too large to read at all: ask for fewer pages, select less with jq, or "
        "send a smaller document (long text comes in slices, never too_long).",
    )
    ENCRYPTED = (
        "encrypted",
        422,
        "The document is protected by a password or DRM, and sift reads no such file: send a copy "
        "saved without protection.",
    )
    UNREADABLE = (
        "unreadable",
        422,
        "The document is damaged or not what its format says: open and save it again, or send another copy.",
    )
    EMPTY = (
        "empty",
        422,
        "The page holds no text to read: check the URL, or fetch it with render true if its text "
        "is built by scripts.",
    )
    DOCUMENT_CHANGED = (
        "document_changed",
        409,
        "The document changed since that cursor or version: fetch it again without cursor, offset "
        "and version, and start reading afresh.",
    )
    BUSY = "busy", 429, "The site or sift is overloaded; submit this URL again later."
    UPSTREAM_4XX = "upstream_4xx", 502, "The site refused the request; check the URL."
    UPSTREAM_5XX = (
        "upstream_5xx",
        502,
        "The site failed; try again later, or ask with recover for a cached copy.",
    )
    TIMEOUT = "timeout", 504, "The site did not answer in time; try again later."
    FILTER_TIMEOUT = "filter_timeout", 422, "Simplify the jq program or pattern, or narrow the pages."
    MEMORY_LIMIT = (
        "memory_limit",
        422,
        "Reading this needs more memory than sift gives it: narrow it (pages, a smaller jq), "
        "fetch it with render false, or send a smaller document.",
    )
    ACTION_FAILED = (
        "action_failed",
        422,
        "A step of actions could not be done on the rendered page (the error names its index): "
        "check its CSS selector against the page, or wait_for the element first.",
    )
    # Batch targets only: the worker fetching it died too often. Never an answer of /v1/fetch.
    WORKER_LOST = (
        "worker_lost",
        500,
        "Fetch this URL alone with /v1/fetch, narrowing it (pages, grep) if it is large.",
    )
    INTERNAL = "internal", 500, "This is our bug; retry later or tell the operator."


class RetryAfter(IntEnum):
    """The one busy policy: seconds a caller refused busy waits before asking again.

    What frees the capacity sets the wait: a fetch slot or a caller's fetch share frees within one
    download; a document parser within one extraction; job capacity only when a whole job ends.
    """

    FETCH = 2
    PARSER = 5
    # A site that answered 429/503 without a Retry-After of its own.
    UPSTREAM = 5
    JOBS = 5
