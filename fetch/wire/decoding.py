"""Content codings of an upstream body: at most two, undone within the size cap and the deadline.

Decompression asks zlib for at most ``limit + 1`` bytes at a time, so a compression bomb is
refused as ``too_long`` without ever being expanded in memory.

It is streaming and linear however many gzip or deflate members a body holds. zlib hands back
what follows a member as a fresh copy (``unused_data``), so feeding a decoder the whole rest of
the body at each member copies it once per member: a megabyte of 20-byte members is then tens of
gigabytes of copying. Here each decoder is fed a small window of the body that doubles while the
member goes on (up to 64 KiB), and the next member starts at an offset into the body rather than
from the copy. What zlib copies per member is then at most about twice the member plus the first
window, linear in the body. The deadline is checked after every window, so the CPU time spent on
a body is bounded by the fetch deadline too, not only the socket reads.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Protocol

from django.conf import settings

from fetch.errors import FetchError
from fetch.outcomes import Outcome

MAX_ENCODINGS = 2
# zlib window bits per content coding; "deflate" is meant to be zlib-wrapped, but many
# servers send raw deflate, so that is tried second.
_WBITS = {"gzip": (31,), "x-gzip": (31,), "deflate": (15, -15)}
# The first window fed to a new member's decoder, and the most fed at once. The smallest gzip
# member is 20 bytes; a window far larger than a member only costs copying, one far smaller
# only costs calls.
FIRST_WINDOW = 256
MAX_WINDOW = 64 * 1024


class Deadline(Protocol):
    """What decoding needs of the fetch deadline: ``check()`` raises its ``timeout`` error."""

    def check(self) -> None: ...


class _NoDeadline:
    def check(self) -> None:
        return None


def too_long() -> FetchError:
    limit = int(settings.SIFT_FETCH_MAX_BYTES)
    return FetchError(
        Outcome.TOO_LONG,
        f"the body is larger than {limit} bytes once decompressed",
        f"sift reads at most {limit / 2**20:.1f} MiB of a document; fetch a smaller document "
        "or a narrower URL.",
    )


def codings(headers: Mapping[str, str]) -> list[str]:
    names = [name.strip().lower() for name in headers.get("content-encoding", "").split(",")]
    codings = [name for name in names if name and name != "identity"]
    if len(codings) > MAX_ENCODINGS:
        raise FetchError(
            Outcome.UNSUPPORTED,
            f"the body has {len(codings)} content encodings; sift undoes at most {MAX_ENCODINGS}",
            "The site stacks too many compression layers; try another URL for the same content.",
        )
    unknown = [name for name in codings if name not in _WBITS]
    if unknown:
        raise FetchError(
            Outcome.UNSUPPORTED,
            f"the content encoding {unknown[0][:40]!r} is not supported",
            "sift understands gzip and deflate only; try another URL for the same content.",
        )
    return codings


def slack(limit: int) -> int:
    """Room for compression overhead: deflate grows incompressible data by well under 0.1%."""
    return limit + limit // 1000 + 1024


def _inflate_members(data: bytes, wbits: int, limit: int, deadline: Deadline) -> bytes:
    """Decompress at most ``limit + 1`` bytes of a body that may hold several members.

    Raises ``zlib.error`` only when the first member is damaged; bytes after a complete member
    that do not start another one are ignored, as browsers do, and a truncated stream keeps what
    arrived.
    """
    view = memoryview(data)
    out = bytearray()
    decoder = zlib.decompressobj(wbits)
    position, window, first = 0, FIRST_WINDOW, True
    while position < len(view):
        piece = view[position : position + window]
        try:
            out += decoder.decompress(piece, limit + 1 - len(out))
        except zlib.error:
            if first:
                raise
            break
        if len(out) > limit:
            raise too_long()
        deadline.check()
        if not decoder.eof:
            position += len(piece) - len(decoder.unconsumed_tail)
            window = min(window * 2, MAX_WINDOW)
            continue
        # The next member starts where this one's input ended, if anything is left.
        position += len(piece) - len(decoder.unused_data)
        if position < len(view):
            decoder, window, first = zlib.decompressobj(wbits), FIRST_WINDOW, False
    return bytes(out)


def _inflate(data: bytes, coding: str, limit: int, deadline: Deadline) -> bytes:
    for wbits in _WBITS[coding]:
        try:
            return _inflate_members(data, wbits, limit, deadline)
        except zlib.error:
            continue
    raise FetchError(
        Outcome.UPSTREAM_5XX,
        f"the body could not be decompressed ({coding})",
        "The site sent a damaged response; retry later.",
    )


def decode(body: bytes, codings: list[str], limit: int, deadline: Deadline | None = None) -> bytes:
    """Undo the codings, last applied first; the middle layer may be a little over the limit.

    ``deadline.check()`` runs between windows and raises the fetch's ``timeout`` error once the
    deadline has passed, however much of the body is left.
    """
    watch = deadline or _NoDeadline()
    for position, coding in enumerate(reversed(codings)):
        body = _inflate(body, coding, limit if position == len(codings) - 1 else slack(limit), watch)
    return body
