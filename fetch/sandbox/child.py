"""The sandbox's child process: PDF text, jq, HTML extraction and documents on untrusted bytes, under limits.

``fetch.sandbox.pool`` starts this file as a script (``python -I child.py MEMORY``, with
an empty environment, ``/`` as its working directory and no file descriptor but its pipes) and
keeps it warm. It imports nothing from Django, so a hostile document never runs next to a
database connection or the server's settings, and it speaks a tiny protocol on its own pipes:

    ready    = frame(JSON header)                      (once, after start-up)
    request  = frame(JSON header) + frame(payload bytes)
    reply    = frame(JSON header) + frame(UTF-8 text)
    frame    = 4-byte big-endian length + bytes

The header of a request names an ``op`` and its arguments, including ``cpu_seconds``: before
each request the soft ``RLIMIT_CPU`` is moved to the CPU time already used plus that budget, so
a warm child is limited per request, not over its lifetime. A runaway ends with SIGXCPU. An
allocation refused under ``RLIMIT_AS`` ends the request as ``{"error": "memory"}`` (then the
child exits) when Python sees it: a ``MemoryError``, or an lxml error whose log holds libxml2's
``ERR_NO_MEMORY``; outside a request the child exits with ``MEMORY_EXIT_STATUS``; PDFium and jq
abort the process (SIGABRT). The parent tells running out of time from running out of memory
by how the child ended.
"""

from __future__ import annotations

import codecs
import ctypes
import importlib.util
import json
import logging
import math
import os
import resource
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO

_LENGTH = struct.Struct(">I")
MAX_REQUEST_FRAME = 64 << 20
# The exit status of a child that ran out of memory outside an op (reading a payload, writing a
# reply): ENOMEM's number, which no other exit of this script uses.
MEMORY_EXIT_STATUS = 12
# A document read by several children at once is shared out in runs of at least this many pages.
PDF_MIN_PAGES_PER_PART = 4
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


def pdf_share(pages: list[int], part: list[int] | None) -> list[int]:
    """The pages that part ``index`` of ``count`` (``part``) reads: a contiguous run of ``pages``.

    Runs are of equal length (the last one shorter) and at least ``PDF_MIN_PAGES_PER_PART``
    long, so a short document is read by the first part alone and the others get nothing.
    """
    if part is None:
        return pages
    index, count = part
    size = max(math.ceil(len(pages) / count), PDF_MIN_PAGES_PER_PART)
    return pages[index * size : (index + 1) * size]


def _page_text(document: Any, number: int) -> str:
    """The text of page ``number`` (1-based), as pypdfium2's ``PdfTextPage.get_text_range()``
    returns it, without its helper objects (a page, a text page and finalizers per page)."""
    import pypdfium2 as pdfium  # noqa: PLC0415 — imported at start-up by main(); here for mypy
    import pypdfium2.raw as pdfium_c  # noqa: PLC0415

    page = pdfium_c.FPDF_LoadPage(document, number - 1)
    if not page:
        raise pdfium.PdfiumError("Failed to load page.")
    try:
        textpage = pdfium_c.FPDFText_LoadPage(page)
        if not textpage:
            raise pdfium.PdfiumError("Failed to load text page.")
        try:
            return _text_range(textpage)
        finally:
            pdfium_c.FPDFText_ClosePage(textpage)
    finally:
        pdfium_c.FPDF_ClosePage(page)


def _text_range(textpage: Any) -> str:
    import pypdfium2 as pdfium  # noqa: PLC0415
    import pypdfium2.raw as pdfium_c  # noqa: PLC0415

    count = pdfium_c.FPDFText_CountChars(textpage)
    if count == -1:
        raise pdfium.PdfiumError("Failed to get character count.")
    # Leading and trailing characters with no place in the text are left out of the range asked
    # for, else PDFium reads past it (pypdfium2 issue 261, crbug.com/pdfium/2079).
    text_index = pdfium_c.FPDFText_GetTextIndexFromCharIndex
    first, last = 0, count - 1
    while first <= last and text_index(textpage, first) == -1:
        first += 1
    while first <= last and text_index(textpage, last) == -1:
        last -= 1
    if first > last:
        return ""
    buffer = (ctypes.c_ushort * (text_index(textpage, last) + 2 - text_index(textpage, first)))()
    written = pdfium_c.FPDFText_GetText(textpage, first, last - first + 1, buffer)
    return codecs.decode(memoryview(buffer)[: written - 1], "utf-16-le", "ignore")


def pdf_text(header: dict[str, Any], payload: bytes) -> Reply:
    """Text of the chosen pages (of this part's share of them), each headed ``## Page N``.

    ``chars`` in the reply counts the text as the budget does (each page's text plus two), so
    that the caller of a document read in parts can add the parts up.
    """
    import pypdfium2 as pdfium  # noqa: PLC0415 — imported at start-up by main(); here for mypy

    try:
        document = pdfium.PdfDocument(payload)
    except pdfium.PdfiumError as exc:
        return {"error": "pdf_invalid", "message": str(exc)}, ""
    try:
        total = len(document)
        pages = _fetch_module("documents.page_ranges").pages_wanted(header.get("ranges"), total)
        if pages is None:
            return {"error": "pages_out_of_range", "pages_total": total}, ""
        pages = pdf_share(pages, header.get("part"))
        budget = int(header["max_chars"])
        parts: list[str] = []
        used = 0
        for number in pages:
            text = _page_text(document.raw, number).replace("\r\n", "\n").replace("\r", "\n").strip()
            parts.append(f"## Page {number}\n\n{text}".rstrip())
            used += len(parts[-1]) + 2
            if used > budget:
                return {"error": "too_long", "limit": budget}, ""
        title = (document.get_metadata_value("Title") or "").strip() or None
    finally:
        document.close()
    return {"pages_total": total, "pages": pages, "title": title, "chars": used}, "\n\n".join(parts)


def json_view(header: dict[str, Any], payload: bytes) -> Reply:
    """Every output of the jq program (``.`` by default), pretty-printed, one after another."""
    program = header.get("program") or "."
    budget = int(header["max_chars"])
    try:
        compiled = _fetch_module("sandbox.jq_program").compile_jq(program)
    except ValueError as exc:
        return {"error": "jq_error", "message": str(exc)[:500]}, ""
    outputs: list[str] = []
    used = 0
    try:
        for value in compiled.input_text(payload.decode("utf-8", "replace")):
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


def _html_module() -> ModuleType:
    """``fetch/html/reader.py``, with the modules of ``fetch/html/`` it imports."""
    return _fetch_module("html.reader")


def _log_lines() -> ModuleType:
    """``sift_site/log_lines.py`` (standard library only), loaded by path as ``_fetch_module`` does."""
    spec = importlib.util.spec_from_file_location(
        "log_lines", Path(__file__).parents[2] / "sift_site" / "log_lines.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fetch_module(stem: str) -> ModuleType:
    """``fetch/<stem>.py`` (``stem`` dotted, as ``html.reader``): the folder is loaded by path as
    the package ``fetch``, whose ``__init__`` (as each subpackage's) holds nothing but a docstring,
    since ``-I`` keeps sift off ``sys.path``. Nothing else of it is imported: the modules the child
    runs import neither Django nor the rest of sift."""
    if "fetch" not in sys.modules:
        folder = Path(__file__).parents[1]
        spec = importlib.util.spec_from_file_location(
            "fetch", folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        assert spec is not None
        assert spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules["fetch"] = package
        spec.loader.exec_module(package)
    return importlib.import_module(f"fetch.{stem}")


def html_page(header: dict[str, Any], payload: bytes) -> Reply:
    """Main content of an HTML page (UTF-8 payload), with its title, language and canonical URL,
    what hidden text was dropped, whether the page looks built by scripts, and its facts."""
    reading = _html_module().read_page(
        payload.decode("utf-8", "replace"),
        url=str(header["url"]),
        markdown_mode=bool(header["markdown"]),
        images=bool(header.get("images")),
        hidden_text="keep" if header.get("hidden") == "keep" else "drop",
        rendered=bool(header.get("rendered")),
        structured=bool(header.get("structured")),
        tables=bool(header.get("tables")),
    )
    page = reading.page
    budget = int(header["max_chars"])
    if len(page.content) > budget:
        return {"error": "too_long", "chars": len(page.content), "limit": budget}, ""
    meta = {
        "title": page.title,
        "lang": page.lang,
        "canonical_url": page.canonical_url,
        "script_built": reading.script_built,
        "hidden_chars": reading.hidden_chars,
        "hidden_kept": reading.hidden_kept,
        "facts_at": len(page.content),  # the page's facts follow its text, as JSON
    }
    return meta, page.content + json.dumps(reading.facts, ensure_ascii=False)


def _ping(header: dict[str, Any], payload: bytes) -> Reply:
    """The child's process id and what it inherited (open descriptors, working directory)."""
    descriptors: dict[str, str] = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            descriptors[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the descriptor listdir itself used, closed by now
    return {"pid": os.getpid(), "fds": descriptors, "cwd": os.getcwd()}, ""


OPS: dict[str, Callable[[dict[str, Any], bytes], Reply]] = {
    "pdf": pdf_text,
    "json": json_view,
    "html": html_page,
    "ping": _ping,
    # Sitemaps and a page's links, for /v1/map (sitemap_parse.py).
    "sitemap": lambda header, payload: _fetch_module("discovery.sitemap_parse").sitemap(header, payload),
    "links": lambda header, payload: _fetch_module("discovery.sitemap_parse").links(header, payload),
    # Office documents, books, feeds, CSV and RTF (documents/formats.py), imported on first use.
    "document": lambda header, payload: _fetch_module("documents.formats").read_document(header, payload),
}


def _limit_cpu(seconds: float) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` comes from an allocation that failed: a ``MemoryError``, or an lxml error
    whose log holds libxml2's ``ERR_NO_MEMORY`` (lxml reports a parse that ran out of memory as
    a syntax error, and trafilatura's own parse returns nothing)."""
    if isinstance(exc, MemoryError):
        return True
    log = getattr(exc, "error_log", None)
    try:
        return log is not None and any(entry.type_name == "ERR_NO_MEMORY" for entry in log)
    except MemoryError:
        return True


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
        except Exception as exc:
            if not out_of_memory(exc):
                raise
            logging.getLogger("fetch.sandbox.child").warning("%s ran out of memory", header["op"])
            reply, text, exit_after = {"error": "memory"}, "", True
        del payload
        data = text.encode("utf-8", "replace")
        del text
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

    _html_module()
    _fetch_module("discovery.sitemap_parse")
    # Its log lines go to the parent's stderr, in the format the environment hands on; anything
    # a C library prints goes nowhere, and the protocol owns the original stdout.
    replies = os.fdopen(os.dup(1), "wb")
    _log_lines().configure_isolated(dict(os.environ), stream=os.fdopen(os.dup(2), "w", buffering=1))
    nowhere = os.open(os.devnull, os.O_WRONLY)
    os.dup2(nowhere, 1)
    os.dup2(nowhere, 2)
    os.close(nowhere)
    # Started with only that; Python itself may add LC_CTYPE (locale coercion).
    # jq's $ENV and env read this process's environment: leave nothing in it.
    os.environ.clear()
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    logging.getLogger("fetch.sandbox.child").debug("sandbox child %d ready", os.getpid())
    write_frame(replies, json.dumps({"ready": os.getpid()}).encode())
    replies.flush()
    try:
        _serve(sys.stdin.buffer, replies)
    except MemoryError:
        os._exit(MEMORY_EXIT_STATUS)  # no clean-up: it could need memory too


if __name__ == "__main__":
    main()
