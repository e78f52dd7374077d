"""The main content of an HTML page as Markdown or plain text, with its title, language and
canonical URL.

trafilatura finds the main content; when it finds none, or only a scrap of a page that holds
much more text (an index, a form, an app shell), the whole page is flattened instead, so the
agent still gets the text it asked for.

The service runs this module inside the sandbox child (``extract`` sends the page there), so a
hostile page costs a limited child its memory and CPU, not a web or worker process. The child
loads this file by path, so it imports nothing but the standard library, lxml and trafilatura.
``html_text`` stays callable in-process for benchmarks and tests.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from itertools import islice
from urllib.parse import urljoin, urlsplit

import lxml.html
import trafilatura
from lxml import etree

# trafilatura's own "too short to be the main text" threshold (MIN_EXTRACTED_SIZE).
SHORT_MAIN_CHARS = 250
SHORT_RATIO = 4
# trafilatura's time grows with the number of elements, faster than linearly past ~100,000
# (240,000 paragraphs: 10 s and 500 MB). A page with more elements than this is flattened whole
# instead (a 20 MB page: about 2 s, 250 MB); the "main content" of such a page (a specification,
# a log, a single-page manual) is rarely a small part of it anyway.
MAIN_CONTENT_MAX_ELEMENTS = 50_000
_LANG = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*$")
_SPACES = re.compile(r"\s+")
_PREFIX_ONLY = re.compile(r"#{1,6}|-")
# Elements whose text is never page content.
_SKIPPED = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "head", "iframe", "object", "canvas", "select"}
)
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "dd", "details", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
        "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table",
        "tbody", "thead", "tfoot", "tr", "ul", "caption",
    }
)  # fmt: skip
_CELLS = frozenset({"td", "th"})
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


def html_text(markup: str, *, url: str, markdown: bool) -> HtmlText:
    """Main content of ``markup`` (Markdown when ``markdown``), and the page's metadata."""
    tree = _parse(markup)
    if tree is None:
        return HtmlText("", None, None, None)
    if _element_count(tree, MAIN_CONTENT_MAX_ELEMENTS + 1) > MAIN_CONTENT_MAX_ELEMENTS:
        content = whole_page_text(tree, markdown=markdown)
    else:
        content = _main_content(tree, markdown=markdown)
    return HtmlText(content.strip(), _title(tree), _lang(tree), _canonical_url(tree, url))


def _element_count(tree: lxml.html.HtmlElement, stop: int) -> int:
    return sum(1 for _ in islice(tree.iter(), stop))


def _main_content(tree: lxml.html.HtmlElement, *, markdown: bool) -> str:
    # The URL is deliberately not given to trafilatura: it would write it into its log lines,
    # and sift's logs never carry a URL (docs/metrics.md).
    with TRAFILATURA_LOCK:
        content = trafilatura.extract(
            tree,
            output_format="markdown" if markdown else "txt",
            include_comments=False,
            include_tables=True,
            include_formatting=markdown,
            include_links=False,
            include_images=False,
        )
    content = content or ""
    if len(content) < SHORT_MAIN_CHARS:
        whole = whole_page_text(tree, markdown=markdown)
        # A short extract from a page with much more text is a guess gone wrong (a cookie
        # banner, a caption): the whole page serves the agent better.
        if len(whole) > SHORT_RATIO * len(content):
            return whole
    return content


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


def whole_page_text(tree: lxml.html.HtmlElement, *, markdown: bool) -> str:
    """Every visible text of the page, one block a paragraph (headings and items marked up)."""
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
            if tag in _SKIPPED:
                walker.skip_subtree()
                continue
            if tag in _BLOCKS or tag == "br":
                flush()
            line.append(_block_prefix(tag, markdown))
            line.append(element.text or "")
            continue
        if tag in _BLOCKS:
            flush()
        elif tag in _CELLS:
            line.append(" | ")
        line.append(element.tail or "")
    flush()
    return "\n\n".join(blocks)


def _block_prefix(tag: str, markdown: bool) -> str:
    if markdown and len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
        return "#" * int(tag[1]) + " "
    if markdown and tag == "li":
        return "- "
    return ""
