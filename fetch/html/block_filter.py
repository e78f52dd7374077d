"""Which lines of a page's reading are its main content, told by a model learnt from labelled
pages (``bench/train_blocks.py``), and the lines it is sure are boilerplate dropped.

Each paragraph of the reading ``main_content`` settled on is found again among the page's blocks
(the innermost block element around its text, matched by its words) and measured: its words,
punctuation, digits and capitals, its place in the reading, its element's tag, depth, link share,
siblings built alike, and the ``class`` and ``id`` words around it (``nav``, ``footer``,
``share``, ``comment``, ``content``...), inside which landmarks it lies, how often its text
repeats on the page, and the kind the page declares (``fetch.html.declared_kind``). The boosted
trees of ``models/block_main.json`` (``fetch.html.forest``), read once when first needed, give
each line its chance of being main content.

The service does not use it: dropping the lines the model doubts measured no gain on sites it
never saw (docs/decisions.md), so the sandbox child never imports this module; ``bench/`` does.
It imports nothing but the standard library and lxml, as a page module of the child must.
"""

from __future__ import annotations

import re
from functools import cache

import lxml.html
from lxml import etree

from fetch.html import forest
from fetch.html.block_text import BLOCK_TAGS, SKIPPED_TAGS

_TOKEN = re.compile(r"\w+")
_LINK = re.compile(r"!?\[([^\]\n]*)\]\((?:[^()\s]|\([^()\s]*\))*\)")
KINDS = ("article", "forum", "product", "documentation", "listing", "page")
TAGS = ("p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "div", "td", "dd", "dt", "pre", "blockquote",
        "section", "article", "figcaption", "span", "a")  # fmt: skip
LANDMARKS = ("main", "article", "nav", "header", "footer", "aside", "form", "li", "table", "blockquote")
# Words of the class and id names around a line's element, each a feature (found or not).
NAME_WORDS = (
    "nav", "menu", "footer", "header", "share", "social", "related", "comment", "author", "byline",
    "date", "time", "meta", "tag", "categor", "breadcrumb", "sidebar", "widget", "subscribe",
    "newsletter", "copyright", "legal", "cookie", "ad", "sponsor", "promo", "content", "article",
    "post", "entry", "body", "text", "title", "headline", "caption", "figure", "price", "product",
    "card", "item", "list", "review", "reply", "message", "toc", "doc", "code", "banner", "btn",
    "button", "link", "footnote", "summary", "description", "main", "story", "desc",
)  # fmt: skip
_NAME_SPLIT = re.compile(r"[^a-z]+")
FEATURES = (
    "words", "chars", "punctuation_share", "ends_sentence", "digit_share", "capital_share",
    "list_mark", "table_row", "position", "lines", "repeats_in_reading", "reading_share",
    "matched", "depth", "link_share", "alike_siblings", "block_position", "repeats_in_page",
    "element_words",
    *(f"tag_{tag}" for tag in TAGS),
    *(f"in_{tag}" for tag in LANDMARKS),
    *(f"name_{word}" for word in NAME_WORDS),
    *(f"kind_{kind}" for kind in KINDS),
)  # fmt: skip
# ``drop_boilerplate`` drops a line the model gives less than this chance of being main content:
# the best threshold cross-validated by site on the pages learnt from (bench/train_blocks.py).
KEEP_AT = 0.15


def key_of(text: str) -> str:
    """A line's words, lower-cased, as its lines and blocks are matched."""
    return " ".join(_TOKEN.findall(_LINK.sub(r"\1", text).lower()))


class PageBlocks:
    """The page's text blocks by their words: the innermost block element around each, its order,
    and how many blocks say the same."""

    def __init__(self, tree: lxml.html.HtmlElement) -> None:
        self.element: dict[str, lxml.html.HtmlElement] = {}
        self.order: dict[str, int] = {}
        self.count: dict[str, int] = {}
        self.prefix: dict[str, str] = {}
        self.total = 0
        stack: list[lxml.html.HtmlElement] = []
        line: list[str] = []

        def flush() -> None:
            key = key_of("".join(line))
            line.clear()
            if not key or not stack:
                return
            self.total += 1
            self.count[key] = self.count.get(key, 0) + 1
            if key not in self.element:
                self.element[key], self.order[key] = stack[-1], self.total
                self.prefix.setdefault(" ".join(key.split(" ")[:8]), key)

        walker = etree.iterwalk(tree, events=("start", "end"))
        for event, element in walker:
            tag = element.tag if isinstance(element.tag, str) else ""
            if event == "start":
                if tag in SKIPPED_TAGS:
                    walker.skip_subtree()
                    continue
                if tag in BLOCK_TAGS or tag == "br":
                    flush()
                if tag in BLOCK_TAGS:
                    stack.append(element)
                line.append(element.text or "")
                continue
            if tag in BLOCK_TAGS:
                flush()
                if stack and stack[-1] is element:
                    stack.pop()
            elif tag in ("td", "th"):
                line.append(" ")
            line.append(element.tail or "")
        flush()

    def find(self, key: str) -> str | None:
        if key in self.element:
            return key
        return self.prefix.get(" ".join(key.split(" ")[:8])) if key.count(" ") >= 5 else None


def line_rows(lines: list[str], blocks: PageBlocks, kind: str, page_chars: int) -> list[list[float]]:
    """Each line's feature values, in ``FEATURES``' order."""
    keys = [key_of(line) for line in lines]
    seen: dict[str, int] = {}
    for key in keys:
        seen[key] = seen.get(key, 0) + 1
    reading_chars = sum(len(line) for line in lines)
    kinds = [float(kind == name) for name in KINDS]
    rows = []
    for n, (line, key) in enumerate(zip(lines, keys, strict=True)):
        plain = _LINK.sub(r"\1", line).strip()
        words = key.split(" ") if key else []
        row = [
            float(len(words)),
            float(len(plain)),
            sum(ch in ".,;:!?" for ch in plain) / max(1, len(plain)),
            float(plain[-1:] in (".", "!", "?", ":")),
            sum(ch.isdigit() for ch in plain) / max(1, len(plain)),
            sum(word[:1].isupper() for word in plain.split()) / max(1, len(words)),
            float(plain.startswith(("- ", "* "))),
            float(plain.startswith("|")),
            n / max(1, len(lines) - 1),
            float(len(lines)),
            float(seen[key]),
            reading_chars / max(1, page_chars),
        ]
        rows.append(row + _element_features(blocks, key) + kinds)
    return rows


_NO_ELEMENT = [0.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0] + [0.0] * (
    len(TAGS) + len(LANDMARKS) + len(NAME_WORDS)
)


def _element_features(blocks: PageBlocks, key: str) -> list[float]:
    found = blocks.find(key)
    if found is None:
        return list(_NO_ELEMENT)
    element = blocks.element[found]
    ancestors = list(element.iterancestors())
    text = element.text_content()
    links = sum(len(link.text_content()) for link in element.iter("a"))
    parent = element.getparent()
    alike = 0
    if parent is not None:
        alike = sum(
            1
            for sibling in parent
            if sibling.tag == element.tag and sibling.get("class") == element.get("class")
        )
    names: set[str] = set()
    for node in [element, *ancestors]:
        names.update(_NAME_SPLIT.split(f"{node.get('class') or ''} {node.get('id') or ''}".lower()))
    words_of = " ".join(sorted(names))
    tags = {element.tag} | {node.tag for node in ancestors}
    return [
        1.0,
        float(len(ancestors)),
        links / max(1, len(text)),
        float(alike),
        blocks.order[found] / max(1, blocks.total),
        float(blocks.count[found]),
        float(len(_TOKEN.findall(text))),
        *(float(element.tag == tag) for tag in TAGS),
        *(float(tag in tags) for tag in LANDMARKS),
        *(float(word in words_of) for word in NAME_WORDS),
    ]


def split_lines(content: str) -> list[str]:
    return [line for line in content.split("\n") if line.strip()]


def drop_boilerplate(content: str, tree: lxml.html.HtmlElement, kind: str, page_chars: int) -> str:
    """``content`` without the lines the model gives less than ``KEEP_AT`` chance of being main
    content; unchanged when that would leave nothing."""
    lines = content.split("\n")
    chosen = [n for n, line in enumerate(lines) if line.strip()]
    if len(chosen) < 2:
        return content
    rows = line_rows([lines[n] for n in chosen], PageBlocks(tree), kind, page_chars)
    model = _model()
    dropped = {n for n, row in zip(chosen, rows, strict=True) if model.shares(row)["main"] < KEEP_AT}
    if len(dropped) == len(chosen):
        return content
    kept = [line for n, line in enumerate(lines) if n not in dropped]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


_chosen: list[forest.Forest] = []


def use_model(model: forest.Forest | None) -> None:
    """Read pages with ``model`` instead of the committed one (None: the committed one again)."""
    _chosen[:] = [model] if model is not None else []


def _model() -> forest.Forest:
    return _chosen[0] if _chosen else _committed()


@cache
def _committed() -> forest.Forest:
    return forest.load("block_main")
