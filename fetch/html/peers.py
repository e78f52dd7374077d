"""The posts of a thread, the items of a listing: siblings built alike, when the extract is one of them.

Main-content extractors look for one block; on a forum thread, a Q&A page or a list of results
the content is a run of sibling blocks built alike, and the extract is one of them
(docs/fetch-content.md). The sandbox child runs this module: standard library and lxml only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import lxml.html

_SPACES = re.compile(r"\s+")
# A thread's posts (a listing's items) are siblings alike in tag and class: at least this many,
# holding at least this many times the text of the one the extractor chose.
PEERS_MIN = 3
PEERS_GAIN = 1.5
# Two blocks are built alike when they share this share of their kinds of elements.
PEERS_ALIKE = 0.5
# The sibling holding the extract holds at most this many times the text of the middle one of
# its peers: a whole article among teasers built like it (an endless-scroll page) stands alone.
PEERS_SPREAD = 5
# The extract is looked for by its first line of at least PROBE_MIN_CHARS, up to PROBE_CHARS of it.
PROBE_MIN_CHARS = 40
PROBE_CHARS = 120
_PEER_TAGS = ("article", "div", "li", "section", "main")


def peer_items(tree: lxml.html.HtmlElement, content: str) -> list[lxml.html.HtmlElement] | None:
    """The posts of a thread (the items of a listing) when ``content`` holds only one of them.

    Main-content extractors look for one block; on a forum thread, a Q&A page or a list of
    results the content is a run of sibling blocks built alike (same tag and first class, mostly
    the same elements inside), each a post or an item, and the extract is one of them. When the
    extract's first line lies inside one of at least ``PEERS_MIN`` such siblings, and
    they hold ``PEERS_GAIN`` times the extract's text, the siblings are the content. Comments
    under an article do not qualify (the article is not inside one), nor do a layout's rows
    (not built alike).
    """
    first = next((line for line in content.split("\n") if len(line) >= PROBE_MIN_CHARS), "")
    first = _SPACES.sub(" ", first).strip()[:PROBE_CHARS]
    if not first:
        return None
    best: list[lxml.html.HtmlElement] | None = None
    best_chars = PEERS_GAIN * len(content)
    for holder_element, items in _sibling_runs(tree, first):
        texts = [_SPACES.sub(" ", item.text_content()) for item in items]
        holder = items.index(holder_element)
        if first not in texts[holder]:
            continue
        shape = _shape(items[holder])
        alike = [n for n, item in enumerate(items) if _similar(_shape(item), shape)]
        sizes = sorted(len(texts[n]) for n in alike)
        if holder not in alike or len(alike) < PEERS_MIN or sum(sizes) <= best_chars:
            continue
        if len(texts[holder]) > PEERS_SPREAD * sizes[len(sizes) // 2]:
            continue
        path = _path_to_text(items[holder], first)
        bodies = [_follow(items[n], path) for n in alike]
        # The block followed in each sibling must be the one holding the extract in its own: in
        # a page builder's layout (many widgets of one class) the same steps lead elsewhere.
        if first in _SPACES.sub(" ", bodies[alike.index(holder)].text_content()):
            best, best_chars = bodies, sum(sizes)
    return best


def _sibling_runs(
    tree: lxml.html.HtmlElement, first: str
) -> Iterator[tuple[lxml.html.HtmlElement, list[lxml.html.HtmlElement]]]:
    """Each block around the text that starts ``first`` (a classed article, div, li, section or
    main) with its siblings of the same tag and first class, when they are ``PEERS_MIN`` or more.
    """
    start = first[:PROBE_MIN_CHARS]
    seen: set[lxml.html.HtmlElement] = set()
    for node in tree.xpath("//text()[contains(normalize-space(.), $start)]", start=start):
        element = node.getparent()
        if element is not None and node.is_tail:
            element = element.getparent()
        while element is not None and element not in seen:
            seen.add(element)
            parent, kind = element.getparent(), _kind(element)
            if element.tag in _PEER_TAGS and kind[1] and parent is not None:
                items = [child for child in parent if isinstance(child.tag, str) and _kind(child) == kind]
                if len(items) >= PEERS_MIN:
                    yield element, items
            element = parent


def _path_to_text(item: lxml.html.HtmlElement, first: str) -> list[tuple[str, str]]:
    """The steps (tag, first class) from ``item`` down to the smallest container holding the
    extract's first line: a post's body without its author box and buttons."""
    path: list[tuple[str, str]] = []
    node = item
    while True:
        inner = next(
            (
                child
                for child in node
                if child.tag in _PEER_TAGS and first in _SPACES.sub(" ", child.text_content())
            ),
            None,
        )
        if inner is None:
            return path
        path.append(_kind(inner))
        node = inner


def _follow(item: lxml.html.HtmlElement, path: list[tuple[str, str]]) -> lxml.html.HtmlElement:
    """The block at ``path`` inside ``item``, or ``item`` itself when it is built otherwise."""
    node = item
    for tag, first_class in path:
        node = next(
            (child for child in node if child.tag == tag and _first_class(child) == first_class),
            None,
        )
        if node is None:
            return item
    return node


def _shape(element: lxml.html.HtmlElement) -> frozenset[tuple[str, str]]:
    """The kinds of elements (tag, first class) among a block's children and grandchildren."""
    kinds: set[tuple[str, str]] = set()
    for child in element:
        kinds.update(_kind(node) for node in (child, *child) if isinstance(node.tag, str))
    return frozenset(kinds)


def _kind(element: lxml.html.HtmlElement) -> tuple[str, str]:
    return element.tag, _first_class(element)


def _first_class(element: lxml.html.HtmlElement) -> str:
    classes = (element.get("class") or "").split()
    return classes[0] if classes else ""


def _similar(one: frozenset[tuple[str, str]], other: frozenset[tuple[str, str]]) -> bool:
    union = one | other
    return bool(union) and len(one & other) >= PEERS_ALIKE * len(union)
