"""CSS selectors matched against a parsed page, as a browser matches them: right to left, from
the elements that have the rightmost part's id, class or tag (``stylesheets.py`` uses it).

cssselect reads the selector and its specificity; each compound part (``div.note``,
``p[data-k="v"]:not(.x)``) becomes a test of one element (in Python for tags, ids and classes,
else the XPath cssselect makes of it, run by lxml); the combinators are followed here. Each
part's result for an element is kept, and a descendant combinator looks at each ancestor once
per part, so that no selector costs more than its parts times the elements. All of a page's
matching shares ``MATCH_WORK`` steps (a part tried on an element, or an ancestor or sibling
looked at); past them ``Matcher.select`` answers None.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import cssselect
import lxml.html
from lxml import etree

# What a hostile page may make the matching do, in steps; the heaviest page of wcxb-dev needs
# 125,000 (docs/security.md, "Hidden text").
MATCH_WORK = 200_000
_TRANSLATOR = cssselect.HTMLTranslator()

ElementTest = Callable[[etree._Element], Any]
Test = tuple[str | None, ElementTest]  # a compound part: the combinator to the part on its left, its test


@dataclass(frozen=True, eq=False)
class Selector:
    parts: tuple[Test, ...]  # right to left
    key: tuple[str, str]  # the rightmost part's ("id" | "class" | "tag" | "*", name)
    needs: frozenset[tuple[str, str]]  # the ids and classes its parts tested in Python name
    specificity: tuple[int, int, int]


def parse_selectors(text: str) -> Iterator[Selector]:
    """Each selector of a rule's prelude as its compound parts, right to left, each a test of one
    element, with its rightmost part's key and its specificity; none for a pseudo-element
    (``::before`` hides only itself) or what cssselect cannot read."""
    try:
        parsed = cssselect.parse(text)
    except cssselect.SelectorError:
        return
    for selector in parsed:
        if selector.pseudo_element is not None:
            continue
        parts: list[tuple[str | None, Any]] = []
        node = selector.parsed_tree
        while isinstance(node, cssselect.parser.CombinedSelector):
            parts.append((node.combinator, node.subselector))
            node = node.selector
        parts.append((None, node))
        try:
            tests = tuple((combinator, _test(part)) for combinator, part in parts)
        except (cssselect.SelectorError, etree.XPathError, ValueError):
            continue  # ValueError: a selector inside :has() or :is(), not matched
        needs = frozenset(need for _, test in tests if isinstance(test, _Simple) for need in test.needs())
        yield Selector(tests, _key(parts[0][1]), needs, selector.specificity())


def _test(compound: Any) -> ElementTest:
    """A test of one element for a compound part: in Python for a tag, an id and classes (most
    parts), else the XPath cssselect makes of it."""
    tag, ids, classes = None, set(), set()
    node = compound
    while type(node).__name__ in ("Class", "Hash"):
        if type(node).__name__ == "Class":
            classes.add(node.class_name)
        else:
            ids.add(node.id)
        node = node.selector
    if type(node).__name__ == "Element" and len(ids) <= 1:
        tag = node.element.lower() if node.element else None
        return _Simple(tag, next(iter(ids), None), frozenset(classes))
    path = str(_TRANSLATOR.xpath(compound))
    if "/" in path:
        raise ValueError(path)
    return _compiled("self::" + path)


@functools.lru_cache(maxsize=4096)
def _compiled(path: str) -> etree.XPath:
    return etree.XPath(path)


@dataclass(frozen=True)
class _Simple:
    tag: str | None
    id: str | None
    classes: frozenset[str]

    def __call__(self, element: etree._Element) -> bool:
        if (self.tag and element.tag != self.tag) or (self.id and element.get("id") != self.id):
            return False
        return not self.classes or self.classes <= set((element.get("class") or "").split())

    def needs(self) -> Iterator[tuple[str, str]]:
        """What an element it matches has, which the page's index holds."""
        yield from (("class", name) for name in self.classes)
        if self.id:
            yield "id", self.id


def _key(compound: Any) -> tuple[str, str]:
    """The id, else a class, else the tag a compound part needs: the elements it can match."""
    found: tuple[str, str] = ("*", "")
    while compound is not None:
        kind = type(compound).__name__
        if kind == "Hash":
            return "id", compound.id
        if kind == "Class":
            found = ("class", compound.class_name)
        elif kind == "Element" and found[0] == "*" and compound.element:
            found = ("tag", compound.element.lower())
        compound = getattr(compound, "selector", None)
    return found


class Matcher:
    """Rules matched against one page, right to left, within MATCH_WORK steps in all."""

    def __init__(self, tree: lxml.html.HtmlElement) -> None:
        self.elements: list[etree._Element] = [e for e in tree.iter() if isinstance(e.tag, str)]
        self.index: dict[tuple[str, str], list[etree._Element]] = defaultdict(list)
        for element in self.elements:
            self.index["tag", element.tag].append(element)
            if element.get("id"):
                self.index["id", element.get("id")].append(element)
            for name in (element.get("class") or "").split():
                self.index["class", name].append(element)
        self.position = {element: at for at, element in enumerate(self.elements)}
        self.work = MATCH_WORK

    def names(self) -> set[str]:
        """The tags (``div``), classes (``.note``) and ids (``#main``) of the page's elements."""
        mark = {"tag": "", "class": ".", "id": "#"}
        return {mark[kind] + name for kind, name in self.index}

    def around(self, elements: set[etree._Element]) -> tuple[set[etree._Element], set[etree._Element]]:
        """What ``elements`` hold, and what holds them."""
        inside: set[etree._Element] = set()
        holding: set[etree._Element] = set()
        for element in sorted(elements, key=self.position.__getitem__):
            if element in inside:
                continue  # inside one met before: all it holds is in
            inside.update(inner for inner in element.iter() if isinstance(inner.tag, str))
            for up in element.iterancestors():
                if up in holding:
                    break
                holding.add(up)
        return inside, holding

    def select(
        self, rule: Selector, within: set[etree._Element] | None = None
    ) -> list[etree._Element] | None:
        """The elements ``rule`` matches (of ``within`` only, when given); None when the work
        allowed has run out."""
        if any(key not in self.index for key in rule.needs):
            return []  # an id or a class it names is nowhere on the page
        candidates = self.elements if rule.key[0] == "*" else self.index.get(rule.key, [])
        if within is not None:
            candidates = [element for element in candidates if element in within]
        known: dict[tuple[int, etree._Element], bool] = {}
        matched = []
        for element in candidates:
            found = self._matches(rule.parts, 0, element, known)
            if found is None:
                return None
            if found:
                matched.append(element)
        return matched

    def _matches(self, parts: tuple[Test, ...], at: int, element: etree._Element, known: dict) -> bool | None:
        if (at, element) in known:
            return known[at, element]
        self.work -= 1
        if self.work < 0:
            return None
        combinator, test = parts[at]
        found: bool | None = bool(test(element))
        if found and combinator == " ":
            found = self._above(parts, at + 1, element.getparent(), known)
            if found is None:
                return None
        elif found and combinator is not None:
            found = False
            for other in _related(element, combinator):
                self.work -= 1
                inner = self._matches(parts, at + 1, other, known)
                if inner is None or self.work < 0:
                    return None
                if inner:
                    found = True
                    break
        known[at, element] = bool(found)
        return found

    def _above(
        self, parts: tuple[Test, ...], at: int, node: etree._Element | None, known: dict
    ) -> bool | None:
        """Whether ``node`` or an element holding it matches ``parts[at:]``: each element is
        looked at once for each part, whatever the number of elements inside it."""
        path = []
        found: bool | None = False
        while node is not None:
            if (~at, node) in known:
                found = known[~at, node]
                break
            found = self._matches(parts, at, node, known)
            if found is None:
                return None
            path.append(node)
            if found:
                break
            node = node.getparent()
        for passed in path:
            known[~at, passed] = bool(found)
        return found


def _related(element: etree._Element, combinator: str) -> Iterator[etree._Element]:
    """The elements the part on the left may be, by the combinator (but the descendant's, which
    ``_above`` follows): the parent, the previous sibling, or every previous sibling."""
    if combinator == ">":
        parent = element.getparent()
        if parent is not None:
            yield parent
    elif combinator == "+":
        previous = element.getprevious()
        while previous is not None and not isinstance(previous.tag, str):
            previous = previous.getprevious()
        if previous is not None:
            yield previous
    elif combinator == "~":
        yield from (
            sibling for sibling in element.itersiblings(preceding=True) if isinstance(sibling.tag, str)
        )
