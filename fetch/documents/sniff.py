"""What a downloaded body is, and its text: the declared type checked against the first bytes.

The declared ``Content-Type`` is believed unless the bytes say otherwise: a PDF or an image keeps
its nature whatever it is declared as (servers mislabel files), and a body of unknown or generic
type (``application/octet-stream``, none at all) is sniffed. A body declared ``text/plain`` stays
text even when it looks like HTML, as in a browser: raw-file hosts serve HTML source that way on
purpose, and the agent asked for that file.
"""

from __future__ import annotations

import codecs
import re

import charset_normalizer

from fetch.errors import FetchError
from fetch.outcomes import Outcome
from fetch.wire import charsets, headers
from fetch.wire.charsets import Encoding

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
JSON_TYPES = frozenset({"application/json", "text/json", "application/x-ndjson", "application/jsonl"})
TEXTUAL_APPLICATION_TYPES = frozenset(
    {
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-javascript",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/x-sh",
        "application/sql",
        "application/graphql",
        "application/x-tex",
        "application/x-latex",
        "application/x-www-form-urlencoded",
    }
)
BINARY_TOP_LEVEL = frozenset({"image", "audio", "video", "font", "model"})

# An OLE compound file: an old Office document, or a new one encrypted with a password (its
# package then sits in a stream named EncryptedPackage).
_COMPOUND_FILE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")
_ZIP = b"PK\x03\x04"
# First bytes of formats sift cannot turn into text, whatever they are declared as.
_MAGIC: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (0, b"\xff\xd8\xff", "a JPEG image"),
    (0, b"GIF87a", "a GIF image"),
    (0, b"GIF89a", "a GIF image"),
    (0, b"II*\x00", "a TIFF image"),
    (0, b"MM\x00*", "a TIFF image"),
    (0, b"8BPS", "a Photoshop image"),
    (0, b"\x00\x00\x01\x00", "an icon"),
    (4, b"ftyp", "an ISO media file (MP4, HEIC, AVIF)"),
    (0, b"RIFF", "a RIFF media file (WebP, WAV, AVI)"),
    (0, b"OggS", "an Ogg media file"),
    (0, b"fLaC", "a FLAC audio file"),
    (0, b"ID3", "an MP3 audio file"),
    (0, b"\x1a\x45\xdf\xa3", "a Matroska/WebM media file"),
    (0, b"PK\x05\x06", "a ZIP archive"),
    (0, b"\x1f\x8b", "a gzip archive"),
    (0, b"\xfd7zXZ\x00", "an xz archive"),
    (0, b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (0, b"Rar!\x1a\x07", "a RAR archive"),
    (0, b"\x28\xb5\x2f\xfd", "a Zstandard archive"),
    (0, b"BZh", "a bzip2 archive"),
    (257, b"ustar", "a tar archive"),
    (0, b"\x7fELF", "an executable"),
    (0, b"MZ", "a Windows executable"),
    (0, b"\xcf\xfa\xed\xfe", "an executable"),
    (0, b"\xca\xfe\xba\xbe", "an executable or Java class"),
    (0, b"\x00asm", "a WebAssembly module"),
    (0, b"wOFF", "a web font"),
    (0, b"wOF2", "a web font"),
    (0, b"OTTO", "a font"),
    (0, b"SQLite format 3\x00", "an SQLite database"),
    (0, _COMPOUND_FILE, "an old Office document (DOC, XLS, PPT)"),
)
GENERIC_TYPES = frozenset(
    {"", "application/octet-stream", "binary/octet-stream", "application/unknown", "application/download"}
)
PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
FEED_TYPES = frozenset(
    {"application/rss+xml", "application/atom+xml", "application/rdf+xml", "application/feed+xml"}
)
XML_TYPES = frozenset({"application/xml", "text/xml"})
RTF_TYPES = frozenset({"application/rtf", "text/rtf", "application/x-rtf", "text/richtext"})
DELIMITED_TYPES = {
    "text/csv": "csv",
    "application/csv": "csv",
    "text/x-csv": "csv",
    "text/comma-separated-values": "csv",
    "text/tab-separated-values": "tsv",
}
# Read by the document readers in the sandbox (``documents.formats``): zip archives (office
# documents and books), RTF, feeds and delimited tables.
DOCUMENT_KINDS = frozenset({"zip", "rtf", "feed", "csv", "tsv"})
# The root element of a feed, after the XML declaration, comments, processing instructions and
# a document type; an Atom feed's root names the Atom namespace.
_FEED_ROOT = re.compile(
    rb"(?:\xef\xbb\xbf)?\s*(?:(?:<\?[^>]{0,500}\?>|<!--(?:[^-]|-[^-]){0,2000}-->|<!DOCTYPE[^>\[]{0,500}(?:\[[^\]]{0,1000}\]\s*)?>)\s*){0,20}"
    rb"<(?:rss[\s>]|rdf:RDF[\s>]|feed[^>]{0,1000}http://www\.w3\.org/2005/Atom)"
)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# WHATWG: bytes that never occur in text ("binary data bytes").
_BINARY_BYTES = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")
# Binary formats run at about 10% binary data bytes; text declared as such may have a few.
STRAY_CONTROL_RATIO = 0.02
_HTML_START = re.compile(
    rb"\s*(?:<!doctype\s+html|<html|<head|<body|<script|<iframe|<h1|<div|<font|<table|<a\s|<style"
    rb"|<title|<b>|<br|<p[\s>]|<meta|<!--)",
    re.IGNORECASE,
)
# A <meta> tag, then the charset inside it: two linear scans. One pattern for both would start
# over at every "<meta" of a page that never closes its tags, quadratic in the head.
_META_TAG = re.compile(rb"<meta[^>]*", re.IGNORECASE)
# Possessive spaces: with plain ones, "charset=" and a long run of spaces backtracks quadratically.
_META_CHARSET = re.compile(rb"""charset\s*+=\s*+["']?\s*+([a-zA-Z0-9_:.\-]+)""", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"""^\s*<\?xml[^>]+encoding\s*=\s*["']([a-zA-Z0-9_.\-]+)""", re.IGNORECASE)
UNSUPPORTED_HINT = (
    "sift reads HTML, PDF, JSON, text, office documents (DOCX, XLSX, PPTX, ODT, ODS, ODP), EPUB, RTF, CSV "
    "and feeds; look for a version of this resource in one of them."
)


def media_type(declared_type: str) -> str:
    """``"Text/HTML; charset=UTF-8"`` → ``"text/html"``; ``""`` when malformed (``headers.content_type``)."""
    return headers.content_type(declared_type)[0]


def declared_charset(declared_type: str) -> str | None:
    """The charset label of a ``Content-Type`` value, if it is a WHATWG label."""
    return headers.content_type(declared_type)[1]


def _binary_format(head: bytes, charset: str | None) -> str | None:
    for offset, magic, name in _MAGIC:
        if head[offset : offset + len(magic)] != magic:
            continue
        # Printable signatures can also start a sentence ("MZ is ...", "The ftyp box"): a text
        # file is only taken for one of these formats when binary bytes confirm it.
        if magic.isascii() and magic.decode().isprintable() and not _looks_binary(head, charset):
            continue
        return name
    return None


def _has_bom(head: bytes) -> bool:
    return any(head.startswith(bom) for bom, _ in _BOMS)


def _looks_binary(head: bytes, charset: str | None, *, declared_text: bool = False) -> bool:
    """WHATWG's test: any binary data byte. For a body declared as text, a few stray control
    characters (a broken CMS, a pasted form feed) are tolerated; binary formats have far more."""
    encoding = charsets.lookup(charset)
    wide = encoding is not None and encoding.is_utf16
    if wide or _has_bom(head):
        return False
    if not declared_text:
        return _BINARY_BYTES.search(head) is not None
    return len(_BINARY_BYTES.findall(head)) > STRAY_CONTROL_RATIO * len(head)


def _starts_like_json(head: bytes) -> bool:
    return head.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] in (b"{", b"[")


def _unsupported(what: str) -> FetchError:
    return FetchError(
        Outcome.UNSUPPORTED, f"the document is {what}, which sift cannot turn into text", UNSUPPORTED_HINT
    )


def sniff_kind(body: bytes, declared_type: str, charset: str | None = None, *, name: str = "") -> str:
    """``"html"``, ``"pdf"``, ``"json"``, ``"text"`` or one of ``DOCUMENT_KINDS``;
    ``FetchError(Outcome.UNSUPPORTED)`` (or ``ENCRYPTED``) otherwise. ``name`` is the URL's path
    or the upload's file name: a table is read from a ``.csv`` or ``.tsv`` file served as text."""
    head = body[:1445]
    declared = media_type(declared_type)
    container = _container_kind(body, declared)
    if container is not None:
        return container
    binary = _binary_format(head, charset)
    if binary is not None:
        raise _unsupported(binary)
    top_level = declared.split("/", 1)[0]
    if top_level in BINARY_TOP_LEVEL:
        raise _unsupported(f"declared {declared}")
    declared_text = (
        top_level == "text"
        or declared in HTML_TYPES | JSON_TYPES | TEXTUAL_APPLICATION_TYPES
        or declared.endswith(("+json", "+xml"))
    )
    if _looks_binary(head, charset, declared_text=declared_text):
        raise _unsupported("binary data" + (f" declared {declared}" if declared else ""))
    if declared in HTML_TYPES:
        return "json" if _starts_like_json(head) else "html"
    if declared in JSON_TYPES or declared.endswith("+json"):
        return "json"
    return _document_kind(head, declared, name) or _textual_kind(head, declared)


def _textual_kind(head: bytes, declared: str) -> str:
    """Text as declared; a generic or unknown type (octet-stream, none) decided from the bytes."""
    if (
        declared.split("/", 1)[0] == "text"
        or declared in TEXTUAL_APPLICATION_TYPES
        or declared.endswith("+xml")
    ):
        return "text"
    if _HTML_START.match(head):
        return "html"
    return "json" if _starts_like_json(head) else "text"


def _container_kind(body: bytes, declared: str) -> str | None:
    """``zip`` (an office document or a book: the reader tells which from its members) or
    ``pdf`` by the first bytes; ``encrypted`` for an office file encrypted with a password."""
    head = body[:1445]
    if head.startswith(_ZIP):
        return "zip"
    if head.startswith(_COMPOUND_FILE) and _ENCRYPTED_PACKAGE in body:
        raise FetchError(
            Outcome.ENCRYPTED,
            "the document is an office file encrypted with a password",
            Outcome.ENCRYPTED.hint,
        )
    # Readers accept "%PDF-" anywhere in the first KiB; only trust that when nothing says "text".
    if head.lstrip().startswith(b"%PDF-") or (
        declared in PDF_TYPES | GENERIC_TYPES and b"%PDF-" in body[:1024]
    ):
        return "pdf"
    return None


def _document_kind(head: bytes, declared: str, name: str) -> str | None:
    """A feed, an RTF file or a delimited table, by its declared type, its name and its first
    bytes; None for anything else. What is declared ``text/plain`` stays text, except a table
    whose name says it is one."""
    suffix = name.lower().rsplit(".", 1)[-1] if "." in name[-5:] else ""
    if declared in DELIMITED_TYPES:
        return DELIMITED_TYPES[declared]
    if suffix in ("csv", "tsv") and (declared == "text/plain" or declared in GENERIC_TYPES):
        return suffix
    if declared == "text/plain":
        return None
    if (declared in FEED_TYPES | XML_TYPES | GENERIC_TYPES or declared.endswith("+xml")) and _FEED_ROOT.match(
        head
    ):
        return "feed"
    if head.startswith(b"{\\rtf") and (declared in RTF_TYPES | GENERIC_TYPES or suffix == "rtf"):
        return "rtf"
    return None


def _embedded_encoding(head: bytes) -> Encoding | None:
    """The encoding an ``<?xml encoding>`` or ``<meta charset>`` in the first bytes names.

    As in the HTML standard's prescan: a document that could be read as ASCII to find its label
    is not UTF-16, so a UTF-16 label there means UTF-8, and x-user-defined means windows-1252.
    """
    match = _XML_ENCODING.match(head) or next(
        (found for tag in _META_TAG.finditer(head) if (found := _META_CHARSET.search(tag[0]))), None
    )
    encoding = charsets.lookup(match[1].decode("ascii")) if match else None
    if encoding is not None and encoding.is_utf16:
        return charsets.UTF_8
    if encoding is not None and encoding.name == charsets.X_USER_DEFINED:
        return charsets.WINDOWS_1252
    return encoding


def _bom(head: bytes) -> str | None:
    return next((name for bom, name in _BOMS if head.startswith(bom)), None)


def _detected(body: bytes) -> Encoding | None:
    """charset-normalizer's guess over the first 256 KiB, if it is a WHATWG encoding."""
    best = charset_normalizer.from_bytes(body[: 256 << 10]).best()
    return charsets.from_python_codec(best.encoding) if best is not None else None


def decode_text(body: bytes, charset: str | None) -> str:
    """Decode with the BOM, the declared charset, an embedded one, UTF-8, or a detected one.

    Only labels of the WHATWG Encoding Standard count (``charsets``); any other label is ignored.
    The first of those that decodes the whole body without error wins. When none does, the
    declared (or embedded) charset is used with replacement characters, then a detected one,
    then UTF-8 with replacement characters.
    """
    text, _ = _decode(body, charset)
    return text


def _decode(body: bytes, charset: str | None) -> tuple[str, Encoding | None]:
    """``decode_text``, and the encoding that decoded the whole body without error (``None``
    after a BOM, which is not part of the text, or with replacement characters)."""
    head = body[:4096]
    bom = _bom(head)
    if bom is not None:
        return body.decode(bom, "replace"), None
    declared = charsets.lookup(charset)
    embedded = _embedded_encoding(head)
    for candidate in dict.fromkeys(c for c in (declared, embedded, charsets.UTF_8) if c):
        try:
            return candidate.decode(body), candidate
        except UnicodeDecodeError:
            continue
    fallback = declared or embedded or _detected(body) or charsets.UTF_8
    return fallback.decode(body, "replace"), None


def utf8_text(body: bytes, charset: str | None) -> bytes:
    """``clean_text(decode_text(body, charset))`` in UTF-8: the body's text, cleaned.

    A body that decodes as UTF-8 without error is that text's UTF-8 already, byte for byte
    (Python's decoder refuses overlong forms and encoded surrogates), so it is cleaned as it is
    rather than encoded again.
    """
    text, encoding = _decode(body, charset)
    if encoding == charsets.UTF_8:
        return _clean_bytes(body)
    return clean_text(text).encode("utf-8")  # no lone surrogate is left to refuse


_SURROGATES = re.compile("[\ud800-\udfff]")


def clean_text(text: str, *, keep_line_ends: bool = False) -> str:
    """No NUL characters, no lone surrogates (so the result is valid UTF-8), ``\\n`` line ends."""
    text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATES.sub("\ufffd", text)
    if keep_line_ends:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _clean_bytes(data: bytes) -> bytes:
    """``clean_text`` on valid UTF-8: NUL and carriage returns are ASCII, whose bytes never occur
    inside a longer UTF-8 sequence, so they are the same to drop or replace in the bytes."""
    # Looked for first: a byte is found many times faster than bytes.replace scans for it.
    if b"\x00" in data:
        data = data.replace(b"\x00", b"")
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data
