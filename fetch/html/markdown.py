"""A parsed page made ready for Markdown an agent can follow, and the Markdown finished after it.

Before extraction (``prepare``): every link is made absolute (against ``<base href>`` when the
page has one, else the page's URL) and a link or image that is not http(s) loses its target (a
``data:`` URI never reaches the output, nor ``javascript:``); images are left as they are when
the output has none (trafilatura drops them unread); spanned table cells
(``colspan``/``rowspan``) are repeated into every column and row they cover, so that each cell
stays in its column; a code block's language (``class="language-python"``, ``lang-js``,
``highlight-source-go``) is written ahead of its code as a marker that ``finish`` turns into the
fence's info string. trafilatura writes the links, images, tables and fences
(docs/fetch-content.md, "Markdown").

The sandbox child imports this module with ``main_content``: standard library and lxml only.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urljoin, urlsplit

import lxml.html

# The marker of a code block's language, printable (the extractor drops what is not); any left
# where no fence took it (a block the extractor read as a quote) is removed.
_LANG_OPEN = "\u27e6sift-language:"
_LANG_CLOSE = "\u27e7"
_LANG_CLASS = re.compile(r"^(?:language|lang|highlight-source|highlight)-([A-Za-z0-9_+#.-]{1,30})$")
_LANG_MARK = re.compile(f"{_LANG_OPEN}([^{_LANG_CLOSE}\\n]{{0,40}}){_LANG_CLOSE}\\n?")
_FENCE_MARK = re.compile(
    f"^(`{{3,}}|~{{3,}})[ \\t]*\\n{_LANG_OPEN}([^{_LANG_CLOSE}\\n]{{1,40}}){_LANG_CLOSE}\\n", re.MULTILINE
)
# A link's number, written at the end of its text for an extractor told to keep no links
# (``links_marked``), and turned back into the link after it (``restore_links``).
# One character of a script no page writes (Tangut), so that the mark hardly lengthens the text
# the extractor weighs: the link's number is the character's place in the block.
_LINK_MARKS = 0x17000
LINK_MARKS_MAX = 6000
_LINK_MARK = re.compile("[\U00017000-\U0001876f]")
_SPACES = re.compile(r"\s+")
# A Markdown link or image whose target is a data: URI, should one come through anyway.
_DATA_TARGET = re.compile(r"(!?\[[^\]\n]*\])\(\s*data:[^)\s]*\)", re.IGNORECASE)
# Attributes where pages keep an image's address (lazy loading among them); trafilatura reads these.
_IMAGE_SOURCES = ("src", "data-src", "data-lazy-src", "data-original")
FOLLOWABLE = ("http", "https")
_ABSOLUTE_HTTP = re.compile(r"https?://[^\s/?#]+(?:[/?#][^\s]*)?\Z", re.IGNORECASE)
# A span larger than this is read as this: the table stays the size the page meant, not more.
MAX_SPAN = 50


def prepare(tree: lxml.html.HtmlElement, *, url: str, markdown: bool, images: bool) -> None:
    """Make ``tree`` ready to extract: spans repeated always; links, code languages and, when
    ``images`` are asked for, images for Markdown (without them, no image reaches the output)."""
    repeat_spanned_cells(tree)
    if markdown:
        base = base_url(tree, url)
        absolute_links(tree, base)
        if images:
            absolute_images(tree, base)
        mark_code_languages(tree)


def base_url(tree: lxml.html.HtmlElement, url: str) -> str:
    """The URL relative links are read against: the first ``<base href>``, itself read against ``url``."""
    for href in tree.xpath("//base/@href"):
        base = urljoin(url, str(href).strip())
        if urlsplit(base).scheme in FOLLOWABLE:
            return base
    return url


def absolute_links(tree: lxml.html.HtmlElement, base: str) -> None:
    """Every link's target absolute (read against ``base``), or gone when it is not http(s)."""
    resolved: dict[str, str | None] = {}  # a page links to the same few places many times
    for link in tree.xpath("//a[@href]"):
        href = link.get("href", "")
        if href not in resolved:
            resolved[href] = _absolute(base, href)
        target = resolved[href]
        if target is None:  # its text stays, as text
            del link.attrib["href"]
            link.tag = "span"
        elif target != href:
            link.set("href", target)


def absolute_images(tree: lxml.html.HtmlElement, base: str) -> None:
    """Every image's source absolute (read against ``base``), or gone when it is not http(s)."""
    for image in tree.xpath("//img"):
        sources = [_absolute(base, image.get(name, "")) for name in _IMAGE_SOURCES if image.get(name)]
        for name in (*_IMAGE_SOURCES, "srcset"):
            image.attrib.pop(name, None)
        usable = [source for source in sources if source]
        if usable:
            image.set("src", usable[0])


def _absolute(base: str, href: str) -> str | None:
    href = href.strip()
    if not href:
        return None
    if _ABSOLUTE_HTTP.match(href):
        return href  # most links of a page: nothing to resolve
    try:
        target = urljoin(base, href)
        scheme = urlsplit(target).scheme.lower()
    except ValueError:  # an unreadable port or bracketed host
        return None
    return target if scheme in FOLLOWABLE else None


def repeat_spanned_cells(tree: lxml.html.HtmlElement) -> None:
    """Each cell with ``colspan``/``rowspan`` repeated into every column and row it covers."""
    for table in tree.xpath("//table[.//*[@colspan or @rowspan]]"):
        rows = [row for row in table.iter("tr") if _table_of(row) is table]
        carried: dict[int, tuple[lxml.html.HtmlElement, int]] = {}  # column → (cell, rows left)
        for row in rows:
            carried = _fill_row(row, carried)


def _fill_row(
    row: lxml.html.HtmlElement, carried: dict[int, tuple[lxml.html.HtmlElement, int]]
) -> dict[int, tuple[lxml.html.HtmlElement, int]]:
    """Lay ``row`` out: cells carried down from rows above take their columns, each cell is
    repeated over its colspan; the cells to carry into the next row."""
    cells = [cell for cell in row if cell.tag in ("td", "th")]
    laid: list[lxml.html.HtmlElement] = []
    below: dict[int, tuple[lxml.html.HtmlElement, int]] = {}
    queue = list(cells)
    column = 0
    while queue or any(col >= column for col in carried):
        if column in carried:
            cell, left = carried[column]
            laid.append(_copy_of(cell))
            if left > 1:
                below[column] = (cell, left - 1)
            column += 1
            continue
        if not queue:
            column += 1
            continue
        cell = queue.pop(0)
        across, down = _span(cell, "colspan"), _span(cell, "rowspan")
        for name in ("colspan", "rowspan"):
            cell.attrib.pop(name, None)
        for step in range(across):
            laid.append(cell if step == 0 else _copy_of(cell))
            if down > 1:
                below[column] = (cell, down - 1)
            column += 1
    if laid != cells:
        for cell in cells:
            cell.tail = None
            row.remove(cell)
        row.extend(laid)
    return below


def _span(cell: lxml.html.HtmlElement, name: str) -> int:
    value = (cell.get(name) or "1").strip()
    return min(int(value), MAX_SPAN) if value.isdigit() and int(value) > 0 else 1


def _copy_of(cell: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    twin = copy.deepcopy(cell)
    twin.tail = None
    for name in ("colspan", "rowspan", "id"):
        twin.attrib.pop(name, None)
    return twin


def _table_of(row: lxml.html.HtmlElement) -> lxml.html.HtmlElement | None:
    for ancestor in row.iterancestors("table"):
        return ancestor
    return None


def mark_code_languages(tree: lxml.html.HtmlElement) -> None:
    """Write the language a ``<pre>`` (or the ``<code>`` in it) names ahead of its code."""
    for block in tree.xpath("//pre"):
        language = code_language(block)
        holder = block.find("code")
        if holder is None or (block.text or "").strip():
            holder = block
        if language:
            holder.text = f"{_LANG_OPEN}{language}{_LANG_CLOSE}\n{holder.text or ''}"


def code_language(block: lxml.html.HtmlElement) -> str | None:
    """The language a code block's classes (or its parent's, as GitHub writes them) name."""
    candidates = [block, *block.iterchildren("code")]
    parent = block.getparent()
    if parent is not None:
        candidates.append(parent)
    for element in candidates:
        for name in (element.get("class") or "").split():
            match = _LANG_CLASS.match(name)
            if match:
                return match[1].lower()
        language = element.get("data-lang") or element.get("data-language")
        if language and re.fullmatch(r"[A-Za-z0-9_+#.-]{1,30}", language):
            return language.lower()
    return None


@contextmanager
def links_marked(tree: lxml.html.HtmlElement) -> Iterator[list[lxml.html.HtmlElement]]:
    """``tree`` with every link that has a target and text ending its text with its number, while
    the block runs; yields the links, by number.

    trafilatura told to keep links reads a page differently: it judges more of it as link lists
    and drops them, on some pages most of the text (docs/decisions.md). Told to keep none, it
    reads the page as in text mode, and the numbers it leaves in the text say where the links
    were (``restore_links``). The marks are taken out of ``tree`` afterwards.
    """
    links: list[lxml.html.HtmlElement] = []
    marked: list[tuple[lxml.html.HtmlElement, str]] = []
    for anchor in tree.iter("a"):
        if not anchor.get("href") or not _has_text(anchor) or len(links) == LINK_MARKS_MAX:
            continue
        holder, place = (anchor[-1], "tail") if len(anchor) else (anchor, "text")
        setattr(holder, place, (getattr(holder, place) or "") + chr(_LINK_MARKS + len(links)))
        marked.append((holder, place))
        links.append(anchor)
    try:
        yield links
    finally:
        for holder, place in marked:
            setattr(holder, place, getattr(holder, place)[:-1] or None)


def _has_text(anchor: lxml.html.HtmlElement) -> bool:
    return bool((anchor.text or "").strip() or (len(anchor) and anchor.text_content().strip()))


def restore_links(content: str, links: list[lxml.html.HtmlElement]) -> str | None:
    """``content`` read from a page whose links ``links_marked`` marked, each marked link written as
    a Markdown link; a link whose text did not come through as it was (split, reformatted) stays text.

    ``None`` when ``content`` holds a character of the marks' block that no mark explains (one past
    the last link's, or one met twice): the page writes that script itself, and would lose it.
    """
    numbers = [ord(mark) - _LINK_MARKS for mark in _LINK_MARK.findall(content)]
    if len(set(numbers)) < len(numbers) or any(number >= len(links) for number in numbers):
        return None
    kept: list[str] = []
    start = 0
    for match in _LINK_MARK.finditer(content):
        before = content[start : match.start()]
        link = links[ord(match[0]) - _LINK_MARKS]
        text = _SPACES.sub(" ", link.text_content()).strip()
        if text and before.endswith(text):
            before = f"{before[: len(before) - len(text)]}[{text}]({link.get('href')})"
        kept.append(before)
        start = match.end()
    kept.append(content[start:])
    return "".join(kept)


def finish(content: str) -> str:
    """The extracted Markdown with code fences naming their language, and no data: target."""
    content = _FENCE_MARK.sub(lambda match: f"{match[1]}{match[2]}\n", content)
    content = _LANG_MARK.sub("", content)
    return _DATA_TARGET.sub(r"\1", content)
