"""Sitemaps and a page's links, read from untrusted bytes inside the sandbox child.

``fetch.discovery.sitemaps`` sends a sitemap file (already un-gzipped) or an HTML page to the child, which
loads this file by path (``child.py`` runs Python isolated, without sift on its path), so
it imports nothing but the standard library and lxml.

XML is read streaming with lxml's ``iterparse``, each element dropped once read, so memory stays
flat however long the file; entities are never substituted, no DTD or external reference is
loaded and nothing is fetched from the network. A sitemap needs no DTD, so a document that
declares one (where a billion-laughs or an external-entity attack lives) is refused outright.
A file that does not start with ``<`` is read as the protocol's plain-text form: one URL a line.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any
from urllib.parse import urljoin

import lxml.html
from lxml import etree

Reply = tuple[dict[str, Any], str]
_URL_LINE = re.compile(r"^https?://\S+$", re.IGNORECASE)
# The fields of a <url> (beyond loc and lastmod: titles, captions, keywords of the image, video
# and news extensions) that ``search`` reads, kept up to this many characters.
_SKIPPED_FIELDS = frozenset({"loc", "lastmod", "changefreq", "priority"})


def _local(tag: object) -> str:
    """``{namespace}name`` → ``name``; comments and processing instructions have no name."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def sitemap(header: dict[str, Any], payload: bytes) -> Reply:
    """The entries of a sitemap or a sitemap index: ``[[loc, lastmod, fields], ...]`` as JSON.

    The reply says ``kind`` (``urlset``, ``sitemapindex`` or ``text``), and ``more: true`` when the
    file holds more than ``max_entries`` entries (the rest are not read).
    """
    most = int(header["max_entries"])
    field_chars = int(header["max_field_chars"])
    url_chars, reply_chars = int(header["max_url_chars"]), int(header["max_reply_chars"])
    used = 0
    start = payload[:1024].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not start.startswith(b"<"):
        return _text_sitemap(payload, most, url_chars, reply_chars)
    entries: list[list[str | None]] = []
    kind, more = "", False
    parser = etree.iterparse(
        io.BytesIO(payload),
        events=("start", "end"),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )
    try:
        for event, element in parser:
            name = _local(element.tag)
            if event == "start":
                if not kind:
                    if element.getroottree().docinfo.doctype:
                        return {"error": "dtd"}, ""
                    kind = name
                continue
            if name in ("url", "sitemap") and element.getparent() is not None:
                entry = _entry(element, field_chars)
                if entry[0] and len(entry[0]) <= url_chars:
                    used += sum(len(part or "") for part in entry) + 16
                    if len(entries) >= most or used > reply_chars:
                        more = True
                        break
                    entries.append(entry)
                element.clear()
                # Siblings already read are dropped too, so the tree never grows.
                while element.getprevious() is not None:
                    del element.getparent()[0]
    except etree.XMLSyntaxError as exc:
        if not kind:
            return {"error": "not_xml", "message": str(exc)[:200]}, ""
        # A file cut short or broken part-way keeps what was read before the break.
    if kind not in ("urlset", "sitemapindex"):
        return {"error": "not_sitemap", "root": kind[:40]}, ""
    return {"kind": kind, "entries": len(entries), "more": more}, json.dumps(entries, ensure_ascii=False)


def _entry(element: Any, field_chars: int) -> list[str | None]:
    loc = lastmod = None
    fields: list[str] = []
    used = 0
    for child in element.iter():
        if child is element:
            continue
        name = _local(child.tag)
        text = (child.text or "").strip()
        if name == "loc" and loc is None and child.getparent() is element:
            loc = text
        elif name == "lastmod" and lastmod is None:
            lastmod = text[:64]
        elif text and name not in _SKIPPED_FIELDS and used < field_chars:
            fields.append(text[: field_chars - used])
            used += len(fields[-1]) + 1
    return [loc, lastmod, " ".join(fields)]


def _text_sitemap(payload: bytes, most: int, url_chars: int, reply_chars: int) -> Reply:
    entries: list[list[str | None]] = []
    more, used = False, 0
    for raw in payload.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if len(line) > url_chars or not _URL_LINE.match(line):
            continue
        used += len(line) + 16
        if len(entries) >= most or used > reply_chars:
            more = True
            break
        entries.append([line, None, ""])
    return {"kind": "text", "entries": len(entries), "more": more}, json.dumps(entries, ensure_ascii=False)


def links(header: dict[str, Any], payload: bytes) -> Reply:
    """The ``href`` of each ``<a>`` and ``<area>`` of an HTML page, absolute against its
    ``<base href>`` and URL, in document order (duplicates left to the caller)."""
    most = int(header["max_entries"])
    base = str(header["url"])
    try:
        document = lxml.html.document_fromstring(payload)
    except (etree.ParserError, ValueError):
        return {"entries": 0, "more": False}, "[]"
    found = document.find(".//base[@href]")
    if found is not None:
        base = urljoin(base, found.get("href", "").strip())
    hrefs: list[str] = []
    more = False
    for element in document.iter("a", "area"):
        href = (element.get("href") or "").strip()
        if not href or href.startswith("#"):
            continue
        if len(hrefs) >= most:
            more = True
            break
        try:
            absolute = urljoin(base, href)
        except ValueError:
            continue
        if len(absolute) <= int(header["max_url_chars"]):
            hrefs.append(absolute)
    return {"entries": len(hrefs), "more": more}, json.dumps(hrefs, ensure_ascii=False)
