"""What a page's ``<meta>`` and ``<link>`` tags and its plain markup say of it: OpenGraph
(``og:*``, ``article:*``, ``product:*``), Twitter cards, Dublin Core (``dc.*``, ``dcterms.*``)
and the common named tags (``description``, ``author``, ``date``), then the page's own
``<title>``, ``lang``, canonical link and ``<time>`` marks.

``meta_tags`` reads every tag once into a dictionary of lower-cased names (each name's values
in order); ``from_meta`` and ``from_markup`` pick each metadata field's candidates from it and
from the page, best first.
"""

from __future__ import annotations

import re
from typing import Any

import lxml.html

from fetch.html.facts import values

MAX_TAGS = 2000
MAX_VALUES_PER_NAME = 20
_SPACES = re.compile(r"\s+")
# The OpenGraph families kept as the page's "opengraph" item (structured: true).
OPENGRAPH_PREFIXES = ("og:", "article:", "product:", "book:", "profile:", "video:", "music:")
# Each field's tags, best first.
_META_FIELDS = {
    "title": ("og:title", "twitter:title", "dcterms.title", "dc.title"),
    "description": ("og:description", "twitter:description", "description", "dcterms.description",
                    "dc.description", "dcterms.abstract"),
    "authors": ("article:author", "author", "dc.creator", "dcterms.creator", "parsely-author",
                "sailthru.author", "byl", "citation_author"),
    "published": ("article:published_time", "og:published_time", "dcterms.issued", "dcterms.created",
                  "dc.date.issued", "dc.date.created", "dc.date", "dcterms.date", "date",
                  "publish-date", "publish_date", "pubdate", "publishdate", "parsely-pub-date",
                  "sailthru.date", "citation_publication_date", "citation_date", "datepublished"),
    "modified": ("article:modified_time", "og:updated_time", "dcterms.modified", "dc.date.modified",
                 "last-modified", "datemodified"),
    "language": ("og:locale", "dc.language", "dcterms.language", "content-language", "language"),
    "site_name": ("og:site_name", "application-name", "apple-mobile-web-app-title"),
    "canonical_url": ("og:url", "twitter:url"),
    "image": ("og:image:secure_url", "og:image:url", "og:image", "twitter:image", "twitter:image:src"),
    "type": ("og:type",),
}  # fmt: skip


def meta_tags(tree: lxml.html.HtmlElement) -> dict[str, list[str]]:
    """Every ``<meta>`` tag's content by its lower-cased ``property``, ``name``, ``itemprop``-less
    ``http-equiv`` name, in order (the first ``MAX_TAGS`` tags)."""
    tags: dict[str, list[str]] = {}
    for meta in tree.xpath("//meta[@content][@property or @name or @http-equiv]")[:MAX_TAGS]:
        content = meta.get("content", "")
        for key in ("property", "name", "http-equiv"):
            names = (meta.get(key) or "").lower().split()
            for name in names[:3]:
                found = tags.setdefault(name, [])
                if len(found) < MAX_VALUES_PER_NAME:
                    found.append(content)
    return tags


def from_meta(tags: dict[str, list[str]], base: str) -> dict[str, Any]:
    """Each metadata field the tags give, read as its kind of value, the best tag first."""
    found: dict[str, Any] = {}
    for field, names in _META_FIELDS.items():
        candidates = [value for name in names for value in tags.get(name, ())]
        value = read_field(field, candidates, base)
        if value:
            found[field] = value
    return found


def read_field(field: str, candidates: list[Any], base: str) -> Any:
    """The first of ``candidates`` that reads as ``field``'s kind of value (all of them, for
    ``authors``); None when none does."""
    if field == "authors":
        return values.names(candidates) or None
    reader = _READERS[field]
    for candidate in candidates:
        value = reader(candidate, base)
        if value:
            return value
    return None


_READERS = {
    "title": lambda value, base: values.text(value, values.TITLE_CHARS),
    "description": lambda value, base: values.text(value, values.DESCRIPTION_CHARS),
    "published": lambda value, base: values.iso_date(value),
    "modified": lambda value, base: values.iso_date(value),
    "language": lambda value, base: values.language(value),
    "site_name": lambda value, base: values.text(value, values.NAME_CHARS),
    "canonical_url": values.page_url,
    "image": values.url,
    "type": lambda value, base: values.text(value, values.NAME_CHARS),
}


def from_markup(tree: lxml.html.HtmlElement, base: str) -> dict[str, Any]:
    """What the page's own markup says: its ``<title>`` (else its first ``<h1>``), ``lang``,
    canonical link, ``rel="author"`` links, ``<time pubdate>`` (else the first ``<time>`` of its
    ``<article>``) and ``image_src`` link."""
    candidates: dict[str, list[Any]] = {
        "title": [tree.xpath("string(//title[1])"), tree.xpath("string(//h1[1])")],
        "language": [tree.get("lang"), tree.get("{http://www.w3.org/XML/1998/namespace}lang")],
        "canonical_url": _link(tree, "canonical"),
        "authors": [_SPACES.sub(" ", str(a.text_content())) for a in tree.xpath("//a[@rel='author']")[:5]],
        "published": tree.xpath("(//time[@pubdate]/@datetime | //article//time/@datetime)[1]"),
        "image": _link(tree, "image_src"),
    }
    found: dict[str, Any] = {}
    for field, listed in candidates.items():
        value = read_field(field, [str(c) for c in listed if c], base)
        if value:
            found[field] = value
    return found


def _link(tree: lxml.html.HtmlElement, rel: str) -> list[str]:
    lowered = "translate(@rel, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"
    xpath = f"//link[contains(concat(' ', {lowered}, ' '), ' {rel} ')]/@href"
    return [str(href) for href in tree.xpath(xpath)[:3]]


def opengraph(tags: dict[str, list[str]]) -> dict[str, Any]:
    """The page's OpenGraph properties as one object (a name met more than once: a list)."""
    graph: dict[str, Any] = {}
    for name, contents in tags.items():
        if name.startswith(OPENGRAPH_PREFIXES):
            graph[name] = contents[0] if len(contents) == 1 else contents
    return graph
