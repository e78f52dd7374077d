"""An HTML page read for an agent: hidden text dropped, Markdown made followable, then the main
content extracted by ``main_content`` (docs/fetch-content.md).

``read_page`` is what the sandbox child runs for every HTML page. Before extraction it judges
whether the served page looks built by scripts (``looks_script_built``: little text, a script,
and an empty element for the scripts to fill), drops the text a reader cannot see
(``fetch.html.hidden``) and prepares links, tables and code blocks (``fetch.html.markdown``). When dropping
hidden text leaves no words at all, the page reveals itself by script: it is read again with
its hidden text, and says so (``hidden_kept``).

The sandbox child imports this module: standard library, lxml, trafilatura and the page
modules beside it only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, Literal

import lxml.html
from lxml import etree

from fetch.html import hidden, markdown
from fetch.html.facts.declared import declared_facts
from fetch.html.facts.tables import PageTable, content_tables, page_tables
from fetch.html.main_content import HtmlText, html_text

Hidden = Literal["drop", "keep"]
# A page with fewer words than this outside its scripts has "little text" (a loading line, a
# cookie notice, a "please enable JavaScript").
SCRIPT_BUILT_MAX_WORDS = 60
_WORD = re.compile(r"\w+")
# The first texts of the body outside scripts and styles: enough to count SCRIPT_BUILT_MAX_WORDS
# words on any page that has them, without reading every text of a long one.
VISIBLE_TEXTS_READ = 200
_NOT_VISIBLE = frozenset({"script", "style", "noscript", "template"})
# What XPath's normalize-space() strips: a text of these alone is no text.
_XML_SPACE = " \t\r\n"
# An element scripts fill: an empty block with an id (<div id="root">), or an empty custom
# element (<app-root>).
_MOUNT = (
    "//body//*[((self::div or self::main or self::section or self::article) and @id"
    " or contains(name(), '-')) and not(*) and normalize-space(.)='']"
)


@dataclass(frozen=True)
class PageReading:
    page: HtmlText
    script_built: bool
    hidden_chars: int
    hidden_kept: bool
    # What the page says about itself (fetch.html.facts): metadata, and what else was asked.
    facts: dict[str, Any]


def read_page(
    markup: str,
    *,
    url: str,
    markdown_mode: bool,
    images: bool,
    hidden_text: Hidden,
    rendered: bool,
    structured: bool = False,
    tables: bool = False,
) -> PageReading:
    """The main content of ``markup`` as the options ask; ``rendered`` when a browser left it;
    its facts (``structured``: its structured data too, ``tables``: its data tables)."""
    found: dict[str, int] = {}
    facts: dict[str, Any] = {}
    in_page: list[PageTable] = []

    def prepare(tree: lxml.html.HtmlElement, keep: bool) -> None:
        if not facts:  # read as the page was served, before anything of it is dropped
            facts.update(declared_facts(tree, url, structured=structured))
        if "script_built" not in found:
            found["script_built"] = int(not rendered and looks_script_built(tree))
        if found["script_built"]:
            # "Enable JavaScript": no text of the page, which the scripts have yet to write.
            for notice in tree.xpath("//noscript"):
                notice.drop_tree()
        found["hidden_chars"] = hidden.drop_hidden(tree, rendered=rendered, keep=keep)
        markdown.prepare(tree, url=url, markdown=markdown_mode, images=images)
        if tables:  # after spanned cells were repeated, as the text will show them
            in_page[:] = page_tables(tree)

    def read(keep: bool) -> HtmlText:
        return html_text(
            markup, url=url, markdown=markdown_mode, images=images, prepare=lambda tree: prepare(tree, keep)
        )

    page = read(keep=hidden_text == "keep")
    kept = False
    if hidden_text == "drop" and found.get("hidden_chars") and not has_words(page.content):
        revealed = read(keep=True)
        if has_words(revealed.content):
            page, kept = revealed, True
    if markdown_mode:
        page = HtmlText(markdown.finish(page.content), page.title, page.lang, page.canonical_url)
    if not facts:  # no page to read
        facts.update(declared_facts(lxml.html.fromstring("<html></html>"), url, structured=structured))
    if tables:
        facts["tables"] = content_tables(page.content, in_page)
    return PageReading(page, bool(found.get("script_built")), found.get("hidden_chars", 0), kept, facts)


def has_words(text: str) -> bool:
    return _WORD.search(text) is not None


def looks_script_built(tree: lxml.html.HtmlElement) -> bool:
    """Whether the served page looks built by scripts: little text, a script that runs, and an
    empty element for it to fill (or a ``<noscript>`` asking for JavaScript)."""
    words = 0
    texts = (text for text in body_texts(tree) if text and text.strip(_XML_SPACE))
    for text in islice(texts, VISIBLE_TEXTS_READ):
        words += len(_WORD.findall(text))
        if words >= SCRIPT_BUILT_MAX_WORDS:
            return False
    return bool(tree.xpath(hidden.RUNNABLE_SCRIPT)) and bool(tree.xpath(_MOUNT) or tree.xpath("//noscript"))


def body_texts(tree: lxml.html.HtmlElement) -> Iterator[str | None]:
    """Each text of the page's body outside scripts, styles, ``<noscript>`` and ``<template>``
    (None for an element or a tail without one), in document order, met one by one: a page with
    enough words in its first texts is not walked to its end (an XPath would find all its texts
    first)."""
    walker = etree.iterwalk(tree, events=("start", "end", "comment", "pi"))
    bodies = 0  # the <body> elements around the place reached
    for event, node in walker:
        if event == "start":
            bodies += node.tag == "body"
            if node.tag in _NOT_VISIBLE:
                walker.skip_subtree()  # its end still comes, and its tail with it
            elif bodies:
                yield node.text
            continue
        if event == "end":
            bodies -= node.tag == "body"
        if bodies:  # the text after a closed element or a comment is its parent's
            yield node.tail
