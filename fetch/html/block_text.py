"""Every visible text of a page (or of one element of it), one block a paragraph.

What ``main_content`` answers when trafilatura's reading is not the content: a page too large for
it, a short guess from a page with much more text, the posts of a thread, a page's one main
element (``fetch.html.page_kinds``). Text mode gives the words; Markdown marks headings and list
items, keeps a link as ``[text](url)`` (its target made absolute by ``fetch.html.markdown``), a code
block in a fence (its language marker left for ``markdown.finish``), an image as
``![alt](src)`` when asked, and a table as rows of
``| cells |`` with a header line. A table is written row by row in text mode too.

The sandbox child runs it: it imports nothing but the standard library and lxml.
"""

from __future__ import annotations

import re

import lxml.html
from lxml import etree

_SPACES = re.compile(r"\s+")
_PREFIX_ONLY = re.compile(r"#{1,6}|-")
# Elements whose text is never page content (a <template> is hidden text: fetch.html.hidden drops it
# unless the caller keeps hidden text).
SKIPPED_TAGS = frozenset(
    {"script", "style", "noscript", "svg", "math", "head", "iframe", "object", "canvas", "select"}
)
BLOCK_TAGS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "dd", "details", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
        "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table",
        "tbody", "thead", "tfoot", "tr", "ul", "caption",
    }
)  # fmt: skip
_CELLS = ("td", "th")
_FOLLOWABLE = ("http://", "https://")


_SKIPPED_PATH = " | ".join(f"//body//{tag}" for tag in sorted(SKIPPED_TAGS - {"head"}))
_SKIPPED_TOP = etree.XPath(
    f"({_SKIPPED_PATH})[not({' or '.join(f'ancestor::{tag}' for tag in sorted(SKIPPED_TAGS - {'head'}))})]"
)
_CHARS = etree.XPath("string-length(normalize-space(.))")
_BODY_CHARS = etree.XPath("string-length(normalize-space(//body))")


def page_chars(tree: lxml.html.HtmlElement) -> int:
    """About how many characters of text the page's body holds, each run of white space counted
    as one, without its scripts, styles and the like: a cheaper measure than ``whole_page_text``'s
    length (libxml2 counts; only the few skipped elements are visited)."""
    skipped = sum(int(_CHARS(element)) for element in _SKIPPED_TOP(tree))
    return max(0, int(_BODY_CHARS(tree)) - skipped)


def whole_page_text(
    tree: lxml.html.HtmlElement, *, markdown: bool, images: bool = False, links: bool = True
) -> str:
    """Every visible text of ``tree``, one block a paragraph, table or code block; in Markdown
    with ``images``, an image with an http(s) source as ``![alt](src)``; without ``links``, a
    link is its text alone (a page too large for trafilatura: its targets would multiply it)."""
    blocks: list[str] = []
    line: list[str] = []

    def flush() -> None:
        text = _SPACES.sub(" ", "".join(line)).strip().removesuffix(" |")
        line.clear()
        if text and not _PREFIX_ONLY.fullmatch(text):
            blocks.append(text)

    walker = etree.iterwalk(tree, events=("start", "end"))
    for event, element in walker:
        tag = element.tag if isinstance(element.tag, str) else ""
        if event == "start":
            if tag in SKIPPED_TAGS:
                walker.skip_subtree()
                continue
            if tag in BLOCK_TAGS or tag == "br":
                flush()
            whole = _table(element, markdown) if tag == "table" else None
            if whole is None and markdown and tag == "pre":
                whole = _fence(element)
            if whole is not None:
                if whole:
                    blocks.append(whole)
                walker.skip_subtree()
                continue
            line.append(_block_prefix(tag, markdown))
            if markdown and images and tag == "img" and (element.get("src") or "").startswith(_FOLLOWABLE):
                alt = _SPACES.sub(" ", element.get("alt") or "").strip().replace("]", "")
                line.append(f"![{alt}]({element.get('src')})")
            if markdown and links and _link_target(element):
                line.append("[")
            line.append(element.text or "")
            continue
        if tag in BLOCK_TAGS:
            flush()
        elif tag in _CELLS:
            line.append(" | ")
        elif markdown and links and (target := _link_target(element)):
            line.append(f"]({target})")
        line.append(element.tail or "")
    flush()
    return "\n\n".join(blocks)


def _block_prefix(tag: str, markdown: bool) -> str:
    if markdown and len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
        return "#" * int(tag[1]) + " "
    if markdown and tag == "li":
        return "- "
    return ""


def _link_target(element: lxml.html.HtmlElement) -> str | None:
    """A link written as ``[text](url)``: an ``<a>`` with an http(s) target, some text and no
    block inside it (a card that is one big link stays its text)."""
    if element.tag != "a":
        return None
    href = (element.get("href") or "").strip()
    if not href.startswith(_FOLLOWABLE) or any(ch in href for ch in " ()\n"):
        return None
    if not element.text_content().strip():
        return None
    if any(child.tag in BLOCK_TAGS for child in element.iterdescendants()):
        return None
    return href


def _fence(block: lxml.html.HtmlElement) -> str:
    code = block.text_content().strip("\n")
    return f"```\n{code}\n```" if code.strip() else ""


def _table(table: lxml.html.HtmlElement, markdown: bool) -> str | None:
    """A table's rows as ``| cell | cell |`` lines (a header line after the first in Markdown);
    None for a table holding another, which is read as blocks."""
    if table.find(".//table") is not None:
        return None
    rows = []
    for row in table.iter("tr"):
        cells = [_SPACES.sub(" ", cell.text_content()).strip() for cell in row if cell.tag in _CELLS]
        if any(cells):
            rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    if markdown and rows:
        columns = rows[0].count(" | ") + 1
        rows.insert(1, "|" + " --- |" * columns)
    return "\n".join(rows)
