"""Content codings of an upstream body (SPEC §5.2): at most two, undone within the size cap.

Decompression asks zlib for at most ``limit + 1`` bytes at a time, so a compression bomb is
refused as ``too_long`` without ever being expanded in memory.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from django.conf import settings

from batch.fetch.errors import FetchError

MAX_ENCODINGS = 2
# zlib window bits per content coding; "deflate" is meant to be zlib-wrapped, but many
# servers send raw deflate, so that is tried second.
_WBITS = {"gzip": (31,), "x-gzip": (31,), "deflate": (15, -15)}


def too_long() -> FetchError:
    limit = int(settings.SIFT_FETCH_MAX_BYTES)
    return FetchError(
        "too_long",
        f"the body is larger than {limit} bytes once decompressed",
        f"sift reads at most {limit / 2**20:.1f} MiB of a document; fetch a smaller document "
        "or a narrower URL.",
    )


def codings(headers: Mapping[str, str]) -> list[str]:
    names = [name.strip().lower() for name in headers.get("content-encoding", "").split(",")]
    codings = [name for name in names if name and name != "identity"]
    if len(codings) > MAX_ENCODINGS:
        raise FetchError(
            "unsupported",
            f"the body has {len(codings)} content encodings; sift undoes at most {MAX_ENCODINGS}",
            "The site stacks too many compression layers; try another URL for the same content.",
        )
    unknown = [name for name in codings if name not in _WBITS]
    if unknown:
        raise FetchError(
            "unsupported",
            f"the content encoding {unknown[0]!r} is not supported",
            "sift understands gzip and deflate only; try another URL for the same content.",
        )
    return codings


def slack(limit: int) -> int:
    """Room for compression overhead: deflate grows incompressible data by well under 0.1%."""
    return limit + limit // 1000 + 1024


def _inflate_members(data: bytes, wbits: int, limit: int) -> bytes:
    """Decompress at most ``limit + 1`` bytes; a gzip body may hold several members."""
    out = bytearray()
    first = True
    while data:
        decoder = zlib.decompressobj(wbits)
        try:
            out += decoder.decompress(data, limit + 1 - len(out))
        except zlib.error:
            if first:
                raise
            break  # bytes after a complete member are ignored, as browsers do
        if len(out) > limit:
            raise too_long()
        if not decoder.eof:
            break  # a truncated stream: keep what arrived
        data, first = decoder.unused_data, False
    return bytes(out)


def _inflate(data: bytes, coding: str, limit: int) -> bytes:
    for wbits in _WBITS[coding]:
        try:
            return _inflate_members(data, wbits, limit)
        except zlib.error:
            continue
    raise FetchError(
        "upstream_5xx",
        f"the body could not be decompressed ({coding})",
        "The site sent a damaged response; retry later.",
    )


def decode(body: bytes, codings: list[str], limit: int) -> bytes:
    """Undo the codings, last applied first; the middle layer may be a little over the limit."""
    for position, coding in enumerate(reversed(codings)):
        body = _inflate(body, coding, limit if position == len(codings) - 1 else slack(limit))
    return body
