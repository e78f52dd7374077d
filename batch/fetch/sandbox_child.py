"""The sandbox's child process: PDF text and jq, run on untrusted bytes under resource limits.

``batch.fetch.sandbox`` starts this file as a script (``python -P sandbox_child.py MEMORY``) and
keeps it warm. It imports nothing from sift, so that a hostile document never runs next to
Django or a database connection, and it speaks a tiny protocol on its own pipes:

    request  = frame(JSON header) + frame(payload bytes)
    reply    = frame(JSON header) + frame(UTF-8 text)
    frame    = 4-byte big-endian length + bytes

The header of a request names an ``op`` and its arguments, including ``cpu_seconds``: before
each request the soft ``RLIMIT_CPU`` is moved to the CPU time already used plus that budget, so
a warm child is limited per request, not over its lifetime. A runaway ends with SIGXCPU; an
allocation over ``RLIMIT_AS`` ends with ``MemoryError`` (reported, then the child exits) or with
an abort inside PDFium or jq. The parent tells these apart by how the child ended.
"""

from __future__ import annotations

import json
import math
import os
import resource
import struct
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

_LENGTH = struct.Struct(">I")
MAX_REQUEST_FRAME = 64 << 20

Reply = tuple[dict[str, Any], str]


class _OutputTooLong(Exception):
    pass


def read_frame(stream: BinaryIO) -> bytes | None:
    prefix = stream.read(_LENGTH.size)
    if len(prefix) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(prefix)
    if length > MAX_REQUEST_FRAME:
        raise SystemExit(3)
    data = stream.read(length)
    if len(data) < length:
        return None
    return data


def write_frame(stream: BinaryIO, data: bytes) -> None:
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)


def _pages_wanted(ranges: list[list[int | None]] | None, total: int) -> list[int] | None:
    """Sorted, de-duplicated 1-based page numbers, or None when a range leaves the document."""
    if ranges is None:
        return list(range(1, total + 1))
    wanted: set[int] = set()
    for start, end in ranges:
        assert start is not None
        last = total if end is None else end
        if start > total or last > total:
            return None
        wanted.update(range(start, last + 1))
    return sorted(wanted)


def pdf_text(header: dict[str, Any], payload: bytes) -> Reply:
    """Text of the chosen pages, each headed ``## Page N``."""
    import pypdfium2 as pdfium  # noqa: PLC0415 — imported at start-up by main(); here for mypy

    try:
        document = pdfium.PdfDocument(payload)
    except pdfium.PdfiumError as exc:
        return {"error": "pdf_invalid", "message": str(exc)}, ""
    total = len(document)
    pages = _pages_wanted(header.get("ranges"), total)
    if pages is None:
        return {"error": "pages_out_of_range", "pages_total": total}, ""
    budget = int(header["max_chars"])
    parts: list[str] = []
    used = 0
    for number in pages:
        page = document[number - 1]
        textpage = page.get_textpage()
        text = textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n").strip()
        textpage.close()
        page.close()
        parts.append(f"## Page {number}\n\n{text}".rstrip())
        used += len(parts[-1]) + 2
        if used > budget:
            return {"error": "too_long", "limit": budget}, ""
    title = (document.get_metadata_value("Title") or "").strip() or None
    document.close()
    return {"pages_total": total, "pages": pages, "title": title}, "\n\n".join(parts)


def json_view(header: dict[str, Any], payload: bytes) -> Reply:
    """Every output of the jq program (``.`` by default), pretty-printed, one after another."""
    import jq  # noqa: PLC0415 — imported at start-up by main(); here for mypy

    program = header.get("program") or "."
    budget = int(header["max_chars"])
    outputs: list[str] = []
    used = 0
    try:
        for value in jq.compile(program).input_text(payload.decode("utf-8", "replace")):
            outputs.append(json.dumps(value, indent=2, ensure_ascii=False))
            used += len(outputs[-1]) + 1
            if used > budget:
                raise _OutputTooLong
    except _OutputTooLong:
        return {"error": "too_long", "limit": budget}, ""
    except ValueError as exc:
        message = str(exc).splitlines()[0] if str(exc) else "jq failed"
        error = "not_json" if message.startswith("parse error") else "jq_error"
        return {"error": error, "message": message[:500]}, ""
    return {"outputs": len(outputs)}, "\n".join(outputs)


def _ping(header: dict[str, Any], payload: bytes) -> Reply:
    return {"pid": os.getpid()}, ""


OPS: dict[str, Callable[[dict[str, Any], bytes], Reply]] = {
    "pdf": pdf_text,
    "json": json_view,
    "ping": _ping,
}


def _limit_cpu(seconds: float) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _serve(requests: BinaryIO, replies: BinaryIO) -> None:
    while True:
        raw_header = read_frame(requests)
        payload = read_frame(requests) if raw_header is not None else None
        if raw_header is None or payload is None:
            return
        header = json.loads(raw_header)
        _limit_cpu(float(header.get("cpu_seconds", 10)))
        exit_after = False
        try:
            reply, text = OPS[header["op"]](header, payload)
        except MemoryError:
            reply, text, exit_after = {"error": "memory"}, "", True
        data = text.encode("utf-8", "replace")
        write_frame(replies, json.dumps(reply).encode())
        write_frame(replies, data)
        replies.flush()
        if exit_after:
            return


def main() -> None:
    memory = int(sys.argv[1])
    # Import the parsers before the memory limit, so the limit is spent on documents only.
    import jq  # noqa: F401, PLC0415
    import pypdfium2  # noqa: F401, PLC0415

    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # The protocol owns the original stdout; anything a C library prints goes to stderr instead.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
