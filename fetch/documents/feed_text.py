"""A news feed (RSS 2.0, RSS 1.0, Atom) as its entries in order: title, link, date and summary,
as Markdown and as a list for the envelope.

The feed is parsed safely (``archive.parse``: a document type only without entities, nothing
loaded or fetched); a summary's HTML is
read by lxml's HTML parser for its text. The sandbox child runs this.
"""

from __future__ import annotations

import contextlib
import re
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

import lxml.html
from lxml import etree

from fetch.documents.archive import Element, parse, unreadable
from fetch.documents.blocks import Run, Writer

ATOM = "{http://www.w3.org/2005/Atom}"
RSS1 = "{http://purl.org/rss/1.0/}"
RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}RDF"
DC_DATE = "{http://purl.org/dc/elements/1.1/}date"
CONTENT = "{http://purl.org/rss/1.0/modules/content/}encoded"
# The entries the envelope lists, and the longest summary each carries there (the Markdown
# content holds every entry whole, in slices when long).
MAX_LISTED_ENTRIES = 200
MAX_LISTED_SUMMARY = 1000
_SPACES = re.compile(r"\s+")
_MARKUP = re.compile(r"<[a-zA-Z/!]")


def read_feed(payload: bytes, writer: Writer) -> tuple[str | None, list[dict[str, Any]], str]:
    """Write the feed's entries; its title, the entries as the envelope lists them, and its
    media type."""
    root = parse(payload, dtd=True)  # RSS 0.91 declares Netscape's DTD
    if root.tag == "rss":
        channel = root.find("channel")
        if channel is None:
            raise unreadable("the RSS feed has no channel")
        title, items = _text(channel, "title"), [_rss_entry(item, "") for item in channel.iter("item")]
        media = "application/rss+xml"
    elif root.tag == f"{ATOM}feed":
        title, items = (
            _text(root, f"{ATOM}title"),
            [_atom_entry(entry) for entry in root.iter(f"{ATOM}entry")],
        )
        media = "application/atom+xml"
    elif root.tag == RDF:
        channel = root.find(f"{RSS1}channel")
        title = _text(channel, f"{RSS1}title") if channel is not None else ""
        items = [_rss_entry(item, RSS1) for item in root.iter(f"{RSS1}item")]
        media = "application/rdf+xml"
    else:
        raise unreadable(f"the XML is not a feed (its root is {root.tag})")
    if title:
        writer.heading(1, title)
    for entry in items:
        _write(entry, writer)
    listed = [
        {**entry, "summary": entry["summary"][:MAX_LISTED_SUMMARY]} for entry in items[:MAX_LISTED_ENTRIES]
    ]
    return title or None, listed, media


def _write(entry: dict[str, Any], writer: Writer) -> None:
    writer.heading(
        2, writer.inline([Run(entry["title"] or entry["link"] or "(untitled)", link=entry["link"])])
    )
    if entry["date"]:
        writer.block(entry["date"])
    if entry["summary"]:
        writer.block(entry["summary"])


def _rss_entry(item: Element, ns: str) -> dict[str, Any]:
    summary = _text(item, CONTENT) or _text(item, f"{ns}description")
    date = _text(item, "pubDate") or _text(item, DC_DATE)
    link = _text(item, f"{ns}link") or _text(item, "guid")
    return {
        "title": _plain(_text(item, f"{ns}title")),
        "link": link,
        "date": _date(date),
        "summary": _plain(summary),
    }


def _atom_entry(entry: Element) -> dict[str, Any]:
    links = entry.findall(f"{ATOM}link")
    link = next(
        (found.get("href", "") for found in links if found.get("rel", "alternate") == "alternate"), ""
    )
    date = _text(entry, f"{ATOM}published") or _text(entry, f"{ATOM}updated")
    summary = _text(entry, f"{ATOM}summary") or _text(entry, f"{ATOM}content")
    return {
        "title": _plain(_text(entry, f"{ATOM}title")),
        "link": link.strip(),
        "date": date,
        "summary": _plain(summary),
    }


def _text(element: Element, tag: str) -> str:
    found = element.find(tag)
    if found is None:
        return ""
    # An Atom text of type xhtml holds elements; any other holds text (escaped HTML included).
    return "".join(found.itertext()).strip()


def _plain(text: str) -> str:
    """A title or summary as plain text: HTML markup read for its text, spaces collapsed."""
    if _MARKUP.search(text):
        with contextlib.suppress(etree.ParserError, ValueError):
            text = lxml.html.fragment_fromstring(text, create_parent="div").text_content()
    return _SPACES.sub(" ", text).strip()


def _date(value: str) -> str:
    """An RFC 822 date (RSS) as ISO 8601; any other date as it is."""
    if not value:
        return ""
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return value
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
        return moment.isoformat().replace("+00:00", "Z")
    return moment.isoformat()
