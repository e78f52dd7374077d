"""The microdata and RDFa items a page declares in its markup, as JSON-LD-like objects
(``{"@type": "Product", "name": ..., "offers": {...}}``), so that one reader serves every syntax.

Microdata (WHATWG): an element with ``itemscope`` is an item, ``itemtype`` its type, and every
``itemprop`` below it (not inside a nested item, plus the elements its ``itemref`` names) a
property whose value is the element's URL, ``content``, ``datetime``, ``value`` or text, or a
nested item. RDFa Lite reads alike: ``typeof`` makes an item, ``property`` a property, whose value
is its ``content``, then ``resource``/``href``/``src``, then its text. schema.org names lose their
vocabulary (``https://schema.org/Product`` is ``Product``); other vocabularies keep their IRIs.

The walk is bounded: at most ``MAX_ITEMS`` items, ``MAX_NESTING`` levels of items and
``MAX_PROPERTIES`` properties; each property is given to its nearest item once, walking up from
it, so a page of thousands of ``itemscope``\\ s costs a bounded walk.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

import lxml.html

from fetch.html.facts.values import URL_CHARS, short_type, url

MAX_ITEMS = 500
MAX_NESTING = 12
MAX_VALUES = 50
MAX_PROPERTIES = 5000
TEXT_CHARS = 2000
_SPACES = re.compile(r"\s+")
_URL_VALUED = {
    "a": "href", "area": "href", "link": "href", "audio": "src", "embed": "src", "iframe": "src",
    "img": "src", "source": "src", "track": "src", "video": "src", "object": "data",
}  # fmt: skip


@dataclass(frozen=True)
class Syntax:
    name: str
    scope: str  # the attribute that makes an item
    prop: str  # the attribute that names a property
    kind: str  # the attribute that names the item's type


MICRODATA = Syntax("microdata", "itemscope", "itemprop", "itemtype")
RDFA = Syntax("rdfa", "typeof", "property", "typeof")


def markup_items(tree: lxml.html.HtmlElement, base: str) -> list[tuple[str, dict[str, Any]]]:
    """Every top-level microdata and RDFa item of the page, with its syntax's name, in order."""
    found: list[tuple[str, dict[str, Any]]] = []
    if not tree.xpath("//@itemscope|//@typeof"):  # the quickest walk, and most pages have none
        return found
    marked = tree.xpath("//*[@itemscope or @typeof or @itemprop or @property]")
    scoped = [e for e in marked if e.get("itemscope") is not None or e.get("typeof") is not None]
    if not scoped:
        return found
    walk = _Walk(tree, base, marked)
    microdata = [e for e in scoped if e.get("itemscope") is not None and e.get("itemprop") is None]
    # RDFa nests items without a property too: an item inside another is its outer item's.
    rdfa = (
        tree.xpath("//*[@typeof][not(@property)][not(ancestor::*[@typeof])]")
        if any(e.get("typeof") is not None for e in scoped)
        else []
    )
    for syntax, elements in ((MICRODATA, microdata), (RDFA, rdfa)):
        for element in elements:
            if walk.budget <= 0:
                return found
            found.append((syntax.name, _item(element, syntax, walk, 0)))
    return found


class _Walk:
    """What one page's walk shares: the page, its base URL, the items left to read, its ids."""

    def __init__(self, tree: lxml.html.HtmlElement, base: str, marked: list[lxml.html.HtmlElement]) -> None:
        self.tree = tree
        self.base = base
        self.marked = marked
        self.budget = MAX_ITEMS
        self._ids: dict[str, lxml.html.HtmlElement] | None = None
        self._owned: dict[Syntax, dict[lxml.html.HtmlElement, list[lxml.html.HtmlElement]]] = {}

    def owned(self, syntax: Syntax, element: lxml.html.HtmlElement) -> list[lxml.html.HtmlElement]:
        """The property elements whose nearest item is ``element``, in document order: each of the
        page's property elements (the first ``MAX_PROPERTIES``) is given to its nearest ancestor
        that makes an item, found once, so the page is not walked in Python item by item."""
        if syntax not in self._owned:
            owners: dict[lxml.html.HtmlElement, list[lxml.html.HtmlElement]] = {}
            holders = (e for e in self.marked if e.get(syntax.prop) is not None)
            for holder in itertools.islice(holders, MAX_PROPERTIES):
                for ancestor in holder.iterancestors():
                    if ancestor.get(syntax.scope) is not None:
                        owners.setdefault(ancestor, []).append(holder)
                        break
            self._owned[syntax] = owners
        return self._owned[syntax].get(element, [])

    def by_id(self, name: str) -> lxml.html.HtmlElement | None:
        if self._ids is None:
            self._ids = {}
            for element in self.tree.xpath("//*[@id]"):
                self._ids.setdefault(element.get("id"), element)
        return self._ids.get(name)


def _item(element: lxml.html.HtmlElement, syntax: Syntax, walk: _Walk, depth: int) -> dict[str, Any]:
    walk.budget -= 1
    item: dict[str, Any] = {}
    types = [short_type(t) for t in (element.get(syntax.kind) or "").split()][:5]
    if types:
        item["@type"] = types[0] if len(types) == 1 else types
    if syntax is MICRODATA and element.get("itemid"):
        item["@id"] = element.get("itemid", "")[:URL_CHARS]
    for holder in _property_elements(element, syntax, walk):
        value: Any
        if holder.get(syntax.scope) is not None and holder is not element:
            nested_ok = depth < MAX_NESTING and walk.budget > 0
            value = _item(holder, syntax, walk, depth + 1) if nested_ok else _text(holder)
        else:
            value = _value(holder, syntax, walk.base)
        if value in (None, "", {}):
            continue
        for name in (holder.get(syntax.prop) or "").split()[:5]:
            _add(item, short_type(name), value)
    return item


def _property_elements(
    element: lxml.html.HtmlElement, syntax: Syntax, walk: _Walk
) -> list[lxml.html.HtmlElement]:
    """The elements whose properties belong to the item ``element``: those below it (and below
    the elements its ``itemref`` names) that no nested item holds, in document order."""
    found = list(walk.owned(syntax, element))
    roots = []
    if syntax is MICRODATA:
        for ref in (element.get("itemref") or "").split()[:20]:
            referred = walk.by_id(ref)
            if referred is not None:
                roots.append(referred)
    for root in roots:  # the elements an itemref names, and those below them
        stack = [root]
        while stack:
            node = stack.pop()
            if not isinstance(node.tag, str):
                continue
            if node.get(syntax.prop) is not None:
                found.append(node)
            if node.get(syntax.scope) is None:
                stack.extend(reversed(list(node)))
    return found


def _value(holder: lxml.html.HtmlElement, syntax: Syntax, base: str) -> Any:
    if syntax is RDFA:
        return _rdfa_value(holder, base)
    if holder.get("content") is not None:
        return holder.get("content", "")[:TEXT_CHARS]
    tag = holder.tag if isinstance(holder.tag, str) else ""
    if tag in _URL_VALUED:
        return url(holder.get(_URL_VALUED[tag]), base)
    if tag in ("data", "meter") and holder.get("value") is not None:
        return holder.get("value", "")[:TEXT_CHARS]
    if tag == "time" and holder.get("datetime") is not None:
        return holder.get("datetime", "")[:TEXT_CHARS]
    return _text(holder)


def _rdfa_value(holder: lxml.html.HtmlElement, base: str) -> Any:
    for attribute in ("content", "resource", "href", "src", "datetime"):
        found = holder.get(attribute)
        if found is not None:
            return url(found, base) if attribute in ("resource", "href", "src") else found[:TEXT_CHARS]
    return _text(holder)


def _text(holder: lxml.html.HtmlElement) -> str:
    return _SPACES.sub(" ", holder.text_content()[: TEXT_CHARS * 4]).strip()[:TEXT_CHARS]


def _add(item: dict[str, Any], name: str, value: Any) -> None:
    if name not in item:
        item[name] = value
        return
    present = item[name]
    values = present if isinstance(present, list) else [present]
    if len(values) < MAX_VALUES:
        item[name] = [*values, value]
