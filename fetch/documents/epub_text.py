"""A book (EPUB) as Markdown: each document of its reading order (the spine) a chapter, read by
the HTML reader's block writer (headings, lists, tables, links), headed by its number.

A book whose chapters are encrypted (``META-INF/encryption.xml`` naming one of them: DRM) is
``encrypted``; obfuscated fonts do not matter. The sandbox child runs this: standard library and
lxml (its HTML parser, which loads no DTD and fetches nothing).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from urllib.parse import unquote

import lxml.html
from lxml import etree

from fetch.documents.archive import Archive, DocumentError, parse, unreadable
from fetch.documents.blocks import Writer
from fetch.html.block_text import whole_page_text

CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
OPF = "{http://www.idpf.org/2007/opf}"
DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
ENCRYPTION = "{http://www.w3.org/2001/04/xmlenc#}"
_DOCUMENT_TYPES = frozenset({"application/xhtml+xml", "text/html", "application/x-dtbook+xml"})


def read_epub(archive: Archive, writer: Writer, wanted: Callable[[int], list[int]]) -> tuple[str | None, int]:
    """Write the chapters ``wanted(total)`` chooses; the book's title and its number of chapters."""
    package = _package_path(archive)
    root = parse(archive.open(package))
    folder = posixpath.dirname(package)
    manifest = {
        item.get("id", ""): posixpath.normpath(posixpath.join(folder, unquote(item.get("href", ""))))
        for item in root.iter(f"{OPF}item")
        if item.get("media-type", "") in _DOCUMENT_TYPES
    }
    spine = [
        manifest[ref.get("idref", "")]
        for ref in root.iter(f"{OPF}itemref")
        if ref.get("idref", "") in manifest
    ]
    chapters = [path for path in spine if archive.has(path)]
    _refuse_encrypted(archive, chapters)
    for number in wanted(len(chapters)):
        writer.part(number, f"Chapter {number}")
        _chapter(archive.read(chapters[number - 1]), writer)
    title = root.find(f"{OPF}metadata/{DC_TITLE}")
    return ((title.text or "").strip() or None) if title is not None else None, len(chapters)


def _package_path(archive: Archive) -> str:
    if not archive.has("META-INF/container.xml"):
        raise unreadable("the book has no META-INF/container.xml")
    rootfile = parse(archive.open("META-INF/container.xml")).find(f".//{CONTAINER}rootfile")
    path = rootfile.get("full-path", "") if rootfile is not None else ""
    if not archive.has(path):
        raise unreadable("the book names no package document it holds")
    return path


def _refuse_encrypted(archive: Archive, chapters: list[str]) -> None:
    if not archive.has("META-INF/encryption.xml"):
        return
    encrypted = {
        posixpath.normpath(unquote(reference.get("URI", "")))
        for reference in parse(archive.open("META-INF/encryption.xml")).iter(f"{ENCRYPTION}CipherReference")
    }
    if encrypted & set(chapters):
        raise DocumentError("encrypted", "the book's chapters are encrypted (DRM)")


def _chapter(data: bytes, writer: Writer) -> None:
    if not data.strip():
        return
    try:
        tree = lxml.html.document_fromstring(data, parser=_PARSER)
    except (etree.ParserError, ValueError):
        return
    body = tree.find("body")
    text = whole_page_text(body if body is not None else tree, markdown=writer.markdown)
    for block in text.split("\n\n"):
        writer.block(block)


_PARSER = lxml.html.HTMLParser(no_network=True, remove_comments=True, remove_pis=True)
