"""Zip archives and XML parts of untrusted documents, read within bounds (docs/fetch-content.md).

Office Open XML, OpenDocument and EPUB files are zip archives of XML. ``Archive`` reads their
members while counting the bytes as they are inflated, never trusting what the headers claim: at
most ``MAX_ENTRIES`` members, ``MAX_INFLATED_BYTES`` inflated in all, and never more than
``MAX_RATIO`` times the archive's own size (a small archive may always inflate
``RATIO_FLOOR_BYTES``). Past a bound the reading ends ``too_long``; an encrypted member ends it
``encrypted``; a damaged archive ``unreadable``. XML is parsed by lxml's C parser, safely:
entities never substituted, no DTD loaded, no network, libxml2's own limits on depth and node
size kept; and a part that declares a document type at all is ``unreadable`` (these formats
declare none; a feed may, without entities).

The sandbox child runs this: it imports the standard library and lxml only.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Iterator
from typing import IO, Any, TypeAlias

from lxml import etree

# An element of a parsed part (lxml's); typed loosely, as lxml ships no annotations.
Element: TypeAlias = Any

MAX_ENTRIES = 10_000
MAX_INFLATED_BYTES = 200_000_000
MAX_RATIO = 100
RATIO_FLOOR_BYTES = 1 << 20
_CHUNK = 64 << 10
_END_OF_DIRECTORY = b"PK\x05\x06"
_END_RECORD = struct.Struct("<4s4H2LH")


class DocumentError(Exception):
    """Why a document cannot be read: ``error`` is ``too_long``, ``encrypted``, ``unreadable`` or
    ``unsupported``, ``message`` says what was found."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def unreadable(message: str) -> DocumentError:
    return DocumentError("unreadable", message)


class Archive:
    """The members of a zip archive, read within the bounds above."""

    def __init__(self, payload: bytes) -> None:
        self.size = len(payload)
        self.inflated = 0
        self.budget = min(MAX_INFLATED_BYTES, max(MAX_RATIO * self.size, RATIO_FLOOR_BYTES))
        if _declared_entries(payload) > MAX_ENTRIES:
            raise _too_many_entries()
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(payload))
        except (
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            NotImplementedError,
            ValueError,
            OSError,
            EOFError,
        ) as exc:
            raise unreadable(f"the zip archive is damaged ({exc})") from None
        members = self._zip.infolist()
        if len(members) > MAX_ENTRIES:
            raise _too_many_entries()
        self._members = {member.filename: member for member in members}

    def has(self, name: str) -> bool:
        return name in self._members

    def names(self) -> list[str]:
        return list(self._members)

    def open(self, name: str) -> IO[bytes]:
        """Member ``name`` as a stream whose bytes are counted as they are inflated."""
        member = self._members.get(name)
        if member is None:
            raise unreadable(f"the archive has no {name}")
        if member.flag_bits & 0x1:
            raise DocumentError("encrypted", f"{name} is encrypted")
        try:
            stream = self._zip.open(member)
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError, ValueError, OSError) as exc:
            raise unreadable(f"{name} cannot be opened ({exc})") from None
        return io.BufferedReader(_Counted(self, stream, name), _CHUNK)

    def read(self, name: str) -> bytes:
        with self.open(name) as stream:
            return stream.read()

    def count(self, inflated: int) -> None:
        self.inflated += inflated
        if self.inflated > self.budget:
            raise DocumentError(
                "too_long",
                f"the archive inflates past {self.budget} bytes "
                f"(at most {MAX_RATIO} times its size, {MAX_INFLATED_BYTES} bytes in all)",
            )


class _Counted(io.RawIOBase):
    """A member's inflated bytes, each counted against the archive's budget as it is read."""

    def __init__(self, archive: Archive, stream: IO[bytes], name: str) -> None:
        self._archive = archive
        self._stream = stream
        self._name = name

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        try:
            data = self._stream.read(min(len(buffer), _CHUNK))
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError, OSError) as exc:
            raise unreadable(f"{self._name} is damaged ({exc})") from None
        self._archive.count(len(data))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._stream.close()
        super().close()


def _declared_entries(payload: bytes) -> int:
    """The entry count the end record claims: a cheap refusal before the directory is read
    (``Archive`` counts the entries it reads too, so a record that lies gains nothing)."""
    at = payload.rfind(_END_OF_DIRECTORY, max(0, len(payload) - (1 << 16) - _END_RECORD.size))
    if at < 0 or at + _END_RECORD.size > len(payload):
        return 0
    return int(_END_RECORD.unpack_from(payload, at)[4])


def _too_many_entries() -> DocumentError:
    return DocumentError("too_long", f"the archive holds more than {MAX_ENTRIES} members")


def parse(stream: IO[bytes] | bytes, *, dtd: bool = False) -> Element:
    """A whole XML part (``dtd``: a document type is allowed if it declares no entity)."""
    root: Element | None = None
    for _event, element in elements(stream, events=("end",), dtd=dtd):
        root = element
    if root is None:
        raise unreadable("an XML part is empty")
    return root


def elements(
    stream: IO[bytes] | bytes,
    events: tuple[str, ...] = ("start", "end"),
    *,
    dtd: bool = False,
    tag: str | tuple[str, ...] | None = None,
) -> Iterator[tuple[str, Element]]:
    """``iterparse`` of an XML part: entities never substituted, nothing loaded or fetched; a part
    that is not well-formed, or declares a document type (``dtd``: one with entities), is
    ``unreadable``. Only elements named ``tag`` (or any of a tuple of names) are reported, when it
    is given (lxml filters them, at C speed). An allocation that failed in libxml2 is a ``MemoryError``."""
    source = io.BytesIO(stream) if isinstance(stream, bytes) else stream
    parsed = etree.iterparse(
        source,
        events=events,
        resolve_entities=False,
        load_dtd=False,
        no_network=True,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        tag=tag,
    )
    checked = False
    try:
        for event, element in parsed:
            if not checked:
                _refuse_document_type(element, dtd)
                checked = True
            yield event, element
    except etree.LxmlError as exc:
        log = getattr(exc, "error_log", None) or []
        if any(entry.type_name == "ERR_NO_MEMORY" for entry in log):
            raise MemoryError from None
        raise unreadable(f"an XML part cannot be read ({str(exc)[:200]})") from None


def _refuse_document_type(element: Element, dtd: bool) -> None:
    """The document type is read before the first element: refused, or (``dtd``) one declaring
    entities refused."""
    info = element.getroottree().docinfo
    if not info.doctype and info.internalDTD is None:
        return
    declares = info.internalDTD is not None and any(True for _ in info.internalDTD.iterentities())
    if not dtd or declares:
        raise unreadable("an XML part declares a document type, which sift does not read")


def children_of(stream: IO[bytes] | bytes, container: str, tag: str | None = None) -> Iterator[Element]:
    """Each child of ``container`` elements (only those named ``tag``, when given), whole, then
    removed: a large part (a sheet's rows, a document's body) is never held whole."""
    for _event, element in elements(stream, events=("end",), tag=tag):
        parent = element.getparent()
        if parent is not None and parent.tag == container:
            yield element
            element.clear()
            parent.remove(element)
