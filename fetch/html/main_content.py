"""The main content of an HTML page as Markdown or plain text, with its title, language and
canonical URL.

A page's cookie and consent banners, its pop-ups and its sections of related items are removed
first (``page_kinds.drop_overlays``, ``page_kinds.drop_related_sections``).
Then the page's kind, from what it says of itself (schema.org types, ``og:type``): an
article is read by trafilatura favouring precision, and again favouring recall when the precise
reading is short (the precise one wins unless it cut into the text), and by its balanced reading
when both fast readings hold a scrap of the page (a fifth of its text or less); any other page (a forum
thread, a product, documentation, a listing, a page that says nothing) by trafilatura's balanced
reading with its fallback extractors, a forum's comments (its replies) included; a page of no
kind or a product page that marks no main element by its reading favouring recall when that one
holds much more. A page of no kind, and an article by ``og:type`` alone whose reading dropped
most of it, is read from the one main element it marks, when it has one
(fetch/html/page_kinds.py). On a thread, where the extract is one of a run of sibling posts
built alike, every sibling's body is the content; on a thread or a product page, a long
paragraph met again (a reply quoting an earlier post, a description shown twice) is left out,
and on a thread a sentence met again (a quote run into a reply's line); on any page, so is a
short line that is a call to action ("Learn more", "Add to cart"). When trafilatura finds nothing, or only
a scrap of a page that holds much more text (an index, a form, an app shell), the page's main
element, else the block around the scrap's lines, else the whole page, is flattened instead, so
the agent still gets the text it asked for. Text mode leaves the page's title to the metadata
(docs/fetch-content.md).

The service runs this module inside the sandbox child (``extract`` sends the page there), so a
hostile page costs a limited child its memory and CPU, not a web or worker process. The child
loads this folder by path, so this module imports nothing but the standard library, lxml and
trafilatura; ``fetch.html.reader`` calls it there, with a ``prepare`` step of its own.
``main_content`` stays callable in-process for benchmarks and tests.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import lxml.html
import trafilatura
from lxml import etree

from fetch.html.block_text import page_chars, whole_page_text
from fetch.html.declared_kind import ARTICLE_TYPES, declared_kind, schema_types
from fetch.html.line_cleanup import (
    drop_calls_to_action,
    drop_repeated_paragraphs,
    drop_repeated_sentences,
    drop_title_lines,
    page_titles,
)
from fetch.html.markdown import links_marked, restore_links
from fetch.html.page_kinds import (
    BALANCED_MORE,
    MAIN_KEEPS,
    MAIN_KEEPS_ARTICLE,
    drop_overlays,
    drop_related_sections,
    grows_inside,
    main_element,
    marks_main,
    navigation_only,
    scrap_holder,
)
from fetch.html.peers import peer_items

# A Markdown link or image: its text, and its target (which may hold one level of parentheses).
_LINK = re.compile(r"!?\[([^\]\n]*)\]\((?:[^()\s]|\([^()\s]*\))*\)")
# On a page of no kind or a product page that marks no main element, trafilatura's reading
# favouring recall replaces the balanced one when it holds at least this many times its text (the
# sibling-post rule's gain).
RECALL_MORE = 1.5
# trafilatura's own "too short to be the main text" threshold (MIN_EXTRACTED_SIZE).
SHORT_MAIN_CHARS = 250
SHORT_RATIO = 4
# The precise reading of the main content is kept when it holds at least this share of the
# recall reading's characters (below it, precision cut into the text itself).
PRECISE_KEEPS = 0.5
# A precise reading this long is kept without a recall reading to weigh it against: on every
# page of the benchmarks where precision cut into the text, it left fewer than 400 characters.
PRECISE_SURE_CHARS = 1000
# An article's fast reading holding less than this share of the page's text, and less than this
# share of trafilatura's balanced reading, missed the story (``_balanced_if_scrap``).
SCRAP_SHARE = 0.2
# trafilatura's time and memory grow with the number of elements, faster than linearly past
# ~100,000 (docs/fetch-content.md). A page with more elements than this is flattened whole
# instead, at a fraction of the cost; the "main content" of such a page (a specification, a log, a
# single-page manual) is rarely a small part of it anyway.
MAIN_CONTENT_MAX_ELEMENTS = 50_000
_LANG = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*$")
_SPACES = re.compile(r"\s+")
# trafilatura is not thread-safe: two threads extracting at once in one process can corrupt the
# heap and abort it ("double free or corruption"; adbar/trafilatura#840, #925). A sandbox child
# is single-threaded; an in-process caller with threads (a benchmark, a test) takes turns.
TRAFILATURA_LOCK = threading.Lock()


@dataclass(frozen=True)
class HtmlText:
    content: str
    title: str | None
    lang: str | None
    canonical_url: str | None


def html_text(
    markup: str,
    *,
    url: str,
    markdown: bool,
    images: bool = False,
    prepare: Callable[[lxml.html.HtmlElement], None] | None = None,
) -> HtmlText:
    """Main content of ``markup`` (Markdown when ``markdown``, with its links, and its images when
    ``images``), and the page's metadata; ``prepare`` changes the parsed page first
    (``fetch.html.reader``)."""
    tree = _parse(markup)
    if tree is None:
        return HtmlText("", None, None, None)
    if prepare is not None:
        prepare(tree)
    prepare_page(tree)
    if _element_count(tree) > MAIN_CONTENT_MAX_ELEMENTS:
        content = whole_page_text(tree, markdown=markdown, images=images, links=False)
    else:
        content = _main_content(tree, markdown=markdown, images=images)
    content = drop_calls_to_action(content)
    # A page of navigation alone reads as its menu: weighed only when the reading is short, so
    # that a page with text pays nothing for the question.
    if _chars(content) < SHORT_MAIN_CHARS and navigation_only(tree):
        content = ""
    return HtmlText(content.strip(), _title(tree), _lang(tree), _canonical_url(tree, url))


def prepare_page(tree: lxml.html.HtmlElement) -> None:
    """Remove what is no text of any page before it is read: overlays and related sections."""
    drop_overlays(tree)
    drop_related_sections(tree)


def _element_count(tree: lxml.html.HtmlElement) -> int:
    # Counted by libxml2 itself: iterating in Python built a proxy object for every element
    # (4% of a page's extraction time); 240,000 elements take a few milliseconds this way.
    return int(tree.xpath("count(//*)"))


def _main_content(tree: lxml.html.HtmlElement, *, markdown: bool, images: bool = False) -> str:
    types = schema_types(tree)
    kind = declared_kind(tree, types)
    if kind != "article":
        content = _trafilatura_page(tree, markdown=markdown, kind=kind, images=images)
        if kind in ("page", "product") and not marks_main(tree):
            content = _recall_instead(tree, content, markdown=markdown, images=images) or content
    else:
        content = _trafilatura_main(tree, markdown=markdown, images=images)
        content = _balanced_if_scrap(tree, content, markdown=markdown, images=images) or content
    whole = _whole_page_instead(tree, content, markdown=markdown, images=images)
    if whole:
        return whole
    og_only = kind == "article" and not types & ARTICLE_TYPES
    if og_only:
        content = _balanced_instead(tree, content, markdown=markdown, images=images) or content
    if kind == "page" or og_only:
        content = _main_element_instead(tree, content, markdown=markdown, images=images, kind=kind) or content
    peers = peer_items(tree, content) if kind == "forum" else None
    if peers:
        content = "\n\n".join(whole_page_text(item, markdown=markdown, images=images) for item in peers)
    if not markdown:
        content = drop_title_lines(content, page_titles(tree))
    if kind in ("forum", "product"):
        content = drop_repeated_paragraphs(content)
    if kind == "forum":
        content = drop_repeated_sentences(content)
    return content


def _trafilatura_page(
    tree: lxml.html.HtmlElement, *, markdown: bool, kind: str, images: bool = False, recall: bool = False
) -> str:
    """trafilatura's balanced reading (favouring recall when ``recall``), its fallback extractors
    included, for a page that is not an article; a forum's comments are its replies."""
    with TRAFILATURA_LOCK:
        return _extract(
            tree, markdown=markdown, images=images, include_comments=kind == "forum", favor_recall=recall
        )


def _recall_instead(tree: lxml.html.HtmlElement, content: str, *, markdown: bool, images: bool) -> str | None:
    """trafilatura's reading favouring recall, when it holds at least ``RECALL_MORE`` times the
    balanced reading ``content``: on a page that names no kind, or a product page, and marks no
    main element, the balanced reading often keeps one of its sections (a service's offer, a
    manual's first part, a thread's first post, a product's description without its features)."""
    recall = _trafilatura_page(tree, markdown=markdown, kind="page", images=images, recall=True)
    return recall if _chars(recall) >= RECALL_MORE * _chars(content) else None


def _balanced_if_scrap(
    tree: lxml.html.HtmlElement, content: str, *, markdown: bool, images: bool
) -> str | None:
    """trafilatura's balanced reading (its fallback extractors included) of an article whose fast
    reading ``content`` holds less than a ``SCRAP_SHARE`` of the page's text, when the balanced
    reading holds at least ``1 / SCRAP_SHARE`` times it: without its fallbacks trafilatura
    sometimes settles on one block of a page (a caption, an intro, a widget) and both fast
    readings miss the story."""
    if _chars(content) >= SCRAP_SHARE * page_chars(tree):
        return None
    balanced = _trafilatura_page(tree, markdown=markdown, kind="article", images=images)
    return balanced if SCRAP_SHARE * _chars(balanced) > _chars(content) else None


def _whole_page_instead(
    tree: lxml.html.HtmlElement, content: str, *, markdown: bool, images: bool
) -> str | None:
    """The page's own main element, else the block holding the lines of ``content``, else the
    whole page's text, when ``content`` is a scrap of a page holding much more."""
    if _chars(content) >= SHORT_MAIN_CHARS:
        return None
    whole = whole_page_text(tree, markdown=markdown, images=images)
    # A short extract from a page with much more text is a guess gone wrong (a cookie
    # banner, a caption): the whole page serves the agent better...
    if _chars(whole) <= SHORT_RATIO * _chars(content):
        return None
    # ...and the one main element the page marks, when it holds much more too, better still (a
    # shop's grid of items without the menus, filters and footer around it).
    # ...else the block around the scrap's own lines, when it is no frame of the page (a grid of
    # items whose prices alone trafilatura kept).
    for block in (main_element(tree), scrap_holder(tree, content)):
        text = whole_page_text(block, markdown=markdown, images=images) if block is not None else ""
        if _chars(text) > SHORT_RATIO * _chars(content):
            return text
    return whole


def _balanced_instead(
    tree: lxml.html.HtmlElement, content: str, *, markdown: bool, images: bool
) -> str | None:
    """trafilatura's balanced reading of an article by ``og:type`` alone, when it holds at least
    ``BALANCED_MORE`` times the fast reading ``content`` and what it adds lies mostly in the
    block holding ``content`` (``fetch.html.page_kinds.grows_inside``): the fast reading cut the text."""
    balanced = _trafilatura_page(tree, markdown=markdown, kind="page", images=images)
    if _chars(balanced) < BALANCED_MORE * _chars(content) or not grows_inside(tree, content, balanced):
        return None
    return balanced


def _main_element_instead(
    tree: lxml.html.HtmlElement, content: str, *, markdown: bool, images: bool, kind: str
) -> str | None:
    """The text of the page's one main element (fetch/html/page_kinds.py) when it holds at least
    ``MAIN_KEEPS`` of trafilatura's reading ``content`` (``MAIN_KEEPS_ARTICLE`` of it on a page
    that calls itself an article only by its ``og:type``)."""
    main = main_element(tree)
    if main is None:
        return None
    text = whole_page_text(main, markdown=markdown, images=images)
    keeps = MAIN_KEEPS if kind == "page" else MAIN_KEEPS_ARTICLE
    return text if _chars(text) >= keeps * _chars(content) else None


def _trafilatura_main(tree: lxml.html.HtmlElement, *, markdown: bool, images: bool = False) -> str:
    """trafilatura's main content, favouring precision, read again favouring recall when short.

    Both readings skip trafilatura's own fallback extractors (``fast``). The precise reading
    drops more of the boilerplate at a text's edges (related links, bylines, share lines), but on
    some pages it drops the text itself, leaving a scrap; so a reading shorter than
    ``PRECISE_SURE_CHARS`` is weighed against a recall reading, and kept unless it holds less
    than ``PRECISE_KEEPS`` of it. A long precise reading is not read twice (docs/decisions.md).
    """
    with TRAFILATURA_LOCK:
        precise = _trafilatura(tree, markdown=markdown, precision=True, images=images)
        if _chars(precise) >= PRECISE_SURE_CHARS:
            return precise
        recall = _trafilatura(tree, markdown=markdown, precision=False, images=images)
    return choose_reading(recall, precise)


def choose_reading(recall: str, precise: str) -> str:
    """The precise reading, unless it holds less than ``PRECISE_KEEPS`` of the recall one."""
    return precise if _chars(precise) >= PRECISE_KEEPS * _chars(recall) else recall


def _trafilatura(
    tree: lxml.html.HtmlElement, *, markdown: bool, precision: bool, images: bool = False
) -> str:
    # The URL is deliberately not given to trafilatura: it would write it into its log lines,
    # and sift's logs never carry a URL (docs/metrics.md).
    return _extract(
        tree,
        markdown=markdown,
        images=images,
        fast=True,
        include_comments=False,
        favor_precision=precision,
        favor_recall=not precision,
    )


def _extract(tree: lxml.html.HtmlElement, *, markdown: bool, images: bool, **options: Any) -> str:
    """trafilatura's reading with tables; in Markdown with formatting, links
    (``fetch.html.markdown.links_marked``) and, when asked, images. A page that writes the marks'
    script itself is read with trafilatura keeping the links."""
    if not markdown:
        return trafilatura.extract(tree, output_format="txt", include_tables=True, **options) or ""
    markdown_options: dict[str, Any] = {
        "output_format": "markdown",
        "include_tables": True,
        "include_formatting": True,
    }
    with links_marked(tree) as links:
        content = trafilatura.extract(
            tree, include_links=False, include_images=images, **markdown_options, **options
        )
    restored = restore_links(content or "", links)
    if restored is None:
        content = trafilatura.extract(
            tree, include_links=True, include_images=images, **markdown_options, **options
        )
        return content or ""
    return restored


def _chars(content: str) -> int:
    """How much text ``content`` holds for a reader: a Markdown link counts its text, not its target,
    so that the readings of a page are weighed alike in either mode."""
    return len(_LINK.sub(r"\1", content)) if "](" in content else len(content)


def _parse(markup: str) -> lxml.html.HtmlElement | None:
    with TRAFILATURA_LOCK:
        tree = trafilatura.load_html(markup)
    if tree is not None:
        return tree
    # trafilatura turns down fragments ("<p>hi</p>" alone); they are still worth flattening.
    try:
        return lxml.html.document_fromstring(f"<div>{markup}</div>")
    except (etree.ParserError, ValueError):
        return None


def _first(tree: lxml.html.HtmlElement, xpath: str) -> str | None:
    for value in tree.xpath(xpath):
        text = _SPACES.sub(" ", str(value)).strip()
        if text:
            return text[:500]
    return None


def _title(tree: lxml.html.HtmlElement) -> str | None:
    heading = _SPACES.sub(" ", str(tree.xpath("string(//h1)"))).strip()[:500]
    return (
        _first(tree, "//meta[@property='og:title']/@content")
        or _first(tree, "//title//text()")
        or heading
        or None
    )


def _lang(tree: lxml.html.HtmlElement) -> str | None:
    candidates = (
        tree.get("lang"),
        tree.get("{http://www.w3.org/XML/1998/namespace}lang"),
        _first(tree, "//meta[translate(@http-equiv, 'CONTENT-LANGUAGE', 'content-language')"
               "='content-language']/@content"),
        _first(tree, "//meta[@property='og:locale']/@content"),
    )  # fmt: skip
    for candidate in candidates:
        value = (candidate or "").split(",")[0].strip().replace("_", "-")
        if _LANG.match(value):
            return value
    return None


def _canonical_url(tree: lxml.html.HtmlElement, url: str) -> str | None:
    hrefs = tree.xpath(
        "//link[contains(concat(' ', translate(@rel, 'CANONICAL', 'canonical'), ' '), ' canonical ')]/@href"
        " | //meta[@property='og:url']/@content"
    )
    for href in hrefs:
        absolute = urljoin(url, str(href).strip())
        if urlsplit(absolute).scheme in ("http", "https"):
            return absolute
    return None
