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
from fetch.html.facts.elements import Elements

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


def meta_tags(metas: list[lxml.html.HtmlElement]) -> dict[str, list[str]]:
    """The content of each of ``metas`` by its lower-cased ``property``, ``name`` or
    ``http-equiv`` name, in order (the first ``MAX_TAGS`` tags)."""
    tags: dict[str, list[str]] = {}
    for meta in metas[:MAX_TAGS]:
        content = meta.get("content")
        if content is None:
            continue
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


def from_markup(tree: lxml.html.HtmlElement, page: Elements, base: str, wanted: set[str]) -> dict[str, Any]:
    """What the page's own markup says of the ``wanted`` fields: its ``<title>`` (else its first
    ``<h1>``), ``lang``, canonical link, ``rel="author"`` links, ``<time pubdate>`` (else the
    first ``<time>`` of its ``<article>``) and ``image_src`` link. A field another source gave
    is not looked for: each of the last three walks the page."""
    titles = [
        t for t in page.title if t.getparent() is not None and t.getparent().tag == "head"
    ] or page.title
    sources: dict[str, Any] = {
        "title": lambda: [_text(titles[:1]), _text(page.h1[:1])],
        "language": lambda: [tree.get("lang"), tree.get("{http://www.w3.org/XML/1998/namespace}lang")],
        "canonical_url": lambda: _links(page, "canonical"),
        "authors": lambda: [_text([a]) for a in tree.xpath("//a[@rel='author']")[:5]],
        "published": lambda: _published(page),
        "image": lambda: _links(page, "image_src"),
    }
    found: dict[str, Any] = {}
    for field, candidates in sources.items():
        if field not in wanted:
            continue
        value = read_field(field, [str(c) for c in candidates() if c], base)
        if value:
            found[field] = value
    return found


def _published(page: Elements) -> list[str]:
    """The ``datetime`` of the first ``<time pubdate>``, else of the first ``<time>`` in an ``<article>``."""
    dated = [t for t in page.time if t.get("datetime")]
    marked = [t for t in dated if t.get("pubdate") is not None]
    in_article = [t for t in dated[:50] if any(a.tag == "article" for a in t.iterancestors())]
    return [t.get("datetime", "") for t in (marked or in_article)[:1]]


def _text(elements: list[lxml.html.HtmlElement]) -> str:
    return _SPACES.sub(" ", elements[0].text_content()[:2000]).strip() if elements else ""


def _links(page: Elements, rel: str) -> list[str]:
    return [
        link.get("href", "")
        for link in page.link
        if rel in (link.get("rel") or "").lower().split() and link.get("href")
    ][:3]


def opengraph(tags: dict[str, list[str]]) -> dict[str, Any]:
    """The page's OpenGraph properties as one object (a name met more than once: a list)."""
    graph: dict[str, Any] = {}
    for name, contents in tags.items():
        if name.startswith(OPENGRAPH_PREFIXES):
            graph[name] = contents[0] if len(contents) == 1 else contents
    return graph
