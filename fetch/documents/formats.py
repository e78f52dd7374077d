"""The sandbox child's ``document`` op: an office document, a book, a feed, a CSV or an RTF file
read into Markdown by the reader of its format (docs/fetch-content.md, "Documents").

A zip archive says what it is by its members: an OpenDocument or EPUB file by its ``mimetype``
member, an Office Open XML package by its main part; any other archive is ``unsupported``. The
reply header names the format (``kind``, ``media_type``), the title, the parts of a paged format
(slides, sheets, chapters: ``pages_total``, ``pages`` and where each starts in the text) and a
feed's entries; or an ``error`` (``too_long``, ``encrypted``, ``unreadable``, ``unsupported``,
``pages_out_of_range``) with a ``message``. Readers are imported with the first document that
needs them, so that an idle child holds none.
"""

from __future__ import annotations

import importlib
from typing import Any

from fetch.documents.archive import Archive, DocumentError
from fetch.documents.blocks import Budget, Writer
from fetch.documents.page_ranges import pages_wanted

MEDIA_TYPES = {
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "odt": "application/vnd.oasis.opendocument.text",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "odp": "application/vnd.oasis.opendocument.presentation",
    "epub": "application/epub+zip",
    "rtf": "application/rtf",
    "feed": "application/rss+xml",
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
}
# Each paged format's reader: module, function (taking the archive, the writer and the chooser
# of parts); the unpaged ones take the archive and the writer.
_PAGED = {
    "xlsx": ("xlsx_text", "read_xlsx"),
    "pptx": ("pptx_text", "read_pptx"),
    "ods": ("odf_sheets", "read_ods"),
    "odp": ("odf_text", "read_odp"),
    "epub": ("epub_text", "read_epub"),
}
_UNPAGED = {"docx": ("docx_text", "read_docx"), "odt": ("odf_text", "read_odt")}
_ODF_MIMETYPES = {
    "application/vnd.oasis.opendocument.text": "odt",
    "application/vnd.oasis.opendocument.spreadsheet": "ods",
    "application/vnd.oasis.opendocument.presentation": "odp",
    "application/epub+zip": "epub",
}


class _PagesPastEnd(Exception):
    def __init__(self, total: int) -> None:
        self.total = total


def read_document(header: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], str]:
    """The op: ``header`` has ``kind`` (``zip``, ``rtf``, ``feed``, ``csv``, ``tsv``),
    ``ranges`` (pages asked for, or None), ``max_chars`` and ``markdown``."""
    writer = Writer(bool(header.get("markdown", True)), Budget(int(header["max_chars"])))
    try:
        reply = _read(str(header["kind"]), payload, header.get("ranges"), writer)
    except DocumentError as exc:
        return {"error": exc.error, "message": exc.message[:500]}, ""
    except _PagesPastEnd as exc:
        return {"error": "pages_out_of_range", "pages_total": exc.total}, ""
    except RecursionError:
        return {"error": "unreadable", "message": "the document is nested too deeply"}, ""
    except (ValueError, LookupError, TypeError, OverflowError) as exc:
        # A value no well-formed document holds (a level that is not a number, a reference to
        # nothing): the document is damaged, whichever reader met it.
        return {"error": "unreadable", "message": f"a value cannot be read ({type(exc).__name__})"}, ""
    text, starts = _joined(writer)
    return {**reply, "parts": starts}, text


def _read(kind: str, payload: bytes, ranges: list[list[int | None]] | None, writer: Writer) -> dict[str, Any]:
    chosen: list[int] = []

    def wanted(total: int) -> list[int]:
        pages = pages_wanted(ranges, total)
        if pages is None:
            raise _PagesPastEnd(total)
        chosen.extend(pages)
        return chosen

    if kind != "zip":
        return {"kind": kind, "media_type": MEDIA_TYPES[kind], **_read_text(kind, payload, writer)}
    archive = Archive(payload)
    kind = _zip_kind(archive)
    if kind in _PAGED:
        module, name = _PAGED[kind]
        title, total = getattr(_reader(module), name)(archive, writer, wanted)
        return {
            "kind": kind,
            "media_type": MEDIA_TYPES[kind],
            "title": title,
            "pages_total": total,
            "pages": chosen,
        }
    module, name = _UNPAGED[kind]
    title = getattr(_reader(module), name)(archive, writer)
    return {"kind": kind, "media_type": MEDIA_TYPES[kind], "title": title}


def _read_text(kind: str, payload: bytes, writer: Writer) -> dict[str, Any]:
    if kind == "feed":
        title, entries, media = _reader("feed_text").read_feed(payload, writer)
        return {"title": title, "entries": entries, "media_type": media}
    tables = _reader("text_tables")
    if kind == "rtf":
        tables.read_rtf(payload, writer)
    else:
        tables.read_delimited(payload.decode("utf-8", "replace"), writer, tabs=kind == "tsv")
    return {"title": None}


def _reader(module: str) -> Any:
    return importlib.import_module(f"fetch.documents.{module}")


def _zip_kind(archive: Archive) -> str:
    if archive.has("mimetype"):
        declared = archive.read("mimetype")[:100].decode("ascii", "replace").strip()
        if declared in _ODF_MIMETYPES:
            _refuse_encrypted_odf(archive)
            return _ODF_MIMETYPES[declared]
    kind = _reader("ooxml").ooxml_kind(archive)
    if kind is None:
        raise DocumentError("unsupported", "a zip archive that is no office document or book")
    return str(kind)


def _refuse_encrypted_odf(archive: Archive) -> None:
    """An OpenDocument file saved with a password lists its encrypted members in its manifest."""
    if archive.has("META-INF/manifest.xml") and b"encryption-data" in archive.read("META-INF/manifest.xml"):
        raise DocumentError("encrypted", "the document is protected by a password")


def _joined(writer: Writer) -> tuple[str, list[list[int]]]:
    """The text of every part, blocks a blank line apart, and where each numbered part starts."""
    texts: list[str] = []
    starts: list[list[int]] = []
    at = 0
    for part in writer.parts:
        text = "\n\n".join(block.replace("\x00", "").replace("\r", "") for block in part.blocks)
        if not text:
            continue
        if part.number:
            starts.append([at, part.number])
        texts.append(text)
        at += len(text) + 2
    return "\n\n".join(texts), starts
