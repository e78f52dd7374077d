"""The page's own styles, as a served page declares them: its ``<style>`` elements and ``style``
attributes, parsed with tinycss2 (comments, escapes and ``!important`` as a browser reads them),
their selectors with cssselect, and the cascade worked out for the properties that can hide text.

Nothing is ever fetched: a ``<link rel="stylesheet">`` or an ``@import`` only tells that the page
has styles sift does not see (``PageStyles.external``). Rules inside ``@media`` apply only for
``all`` or ``screen`` without conditions (what shows on one screen size shows on another), and
not ``:hover`` and the like (cssselect matches them to nothing). Custom properties (``var()``)
are not resolved.

Matching costs at most ``MATCH_WORK`` steps a page (a compound selector tried on an element, or
an ancestor or sibling looked at): a hostile page of many rules over many elements cannot spend
the fetch's deadline. Rules that could hide on their own are matched first; past the cap the rest
are not applied, and ``PageStyles.cut_short`` says so. Selectors are matched right to left, as a
browser does, from the elements that have the rightmost part's id, class or tag, each part's
result for an element kept, so that no selector costs more than its parts times the elements.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import cssselect
import lxml.html
import tinycss2
from lxml import etree
from tinycss2 import ast
from tinycss2.color3 import parse_color

# What a hostile page may make the matching do, in steps (see the module's docstring); a page of
# a few thousand rules over a few thousand elements needs far fewer.
MATCH_WORK = 200_000
# The most CSS read from a page's <style> elements, in characters.
MAX_CSS_CHARS = 1_000_000
# The properties that can hide text, or undo or complete what hides it.
PROPERTIES = frozenset(
    {
        "display", "visibility", "font-size", "position", "left", "top", "text-indent",
        "margin-left", "margin-top", "padding-left", "padding-top", "clip", "clip-path", "transform",
        "height", "max-height", "width", "max-width", "overflow-x", "overflow-y", "color",
        "background-color", "background-image", "transition", "transition-property", "animation",
        "animation-name",
    }
)  # fmt: skip
_BEHIND = frozenset({"background-color", "background-image"})
_INHERITED = frozenset({"font-size", "color"})
_SHORTHANDS = {"margin", "padding", "overflow", "background", "font", "inset"}
_MEDIA_SHOWN = frozenset({"", "all", "screen", "only screen"})
_BLOCK_RULES = frozenset({"supports", "layer", "document", "scope"})
_TRANSLATOR = cssselect.HTMLTranslator()
_EXTERNAL = "//link[contains(translate(@rel, 'STYLEHT', 'styleht'), 'stylesheet')]"

Value = list[ast.Node]


@dataclass
class PageStyles:
    """Each element's winning declaration of each property in ``PROPERTIES`` (its tokens, without
    whitespace and comments), for the elements that have any."""

    declared: dict[etree._Element, dict[str, Value]] = field(default_factory=dict)
    external: bool = False  # the page has styles of its own that sift does not read
    cut_short: bool = False  # MATCH_WORK ran out before every rule was matched


Rank = tuple[int, int, int, int, int]  # level (below), then specificity, then document order
ElementTest = Callable[[etree._Element], Any]
Test = tuple[str | None, ElementTest]  # a compound part: the combinator to the part on its left, its test


@dataclass(frozen=True, eq=False)
class _Rule:
    parts: tuple[Test, ...]  # right to left
    key: tuple[str, str]  # the rightmost part's ("id" | "class" | "tag" | "*", name)
    needs: frozenset[tuple[str, str]]  # the ids and classes of its parts tested in Python
    specificity: tuple[int, int, int]
    order: int
    declarations: tuple[tuple[str, Value, bool], ...]


def page_styles(tree: lxml.html.HtmlElement, hides_alone: Callable[[str, Value], bool]) -> PageStyles:
    """The cascade of ``tree``'s own styles; ``hides_alone(name, value)`` tells which declarations
    could hide an element by themselves. Their rules are matched first; the others only on the
    elements those rules or inline styles may hide, and what is around them (a rule that shows
    one again, its background, a readable font inside it)."""
    styles = PageStyles()
    ranked: dict[etree._Element, dict[str, tuple[Rank, Value]]] = defaultdict(dict)
    inline = [
        (element, list(_declarations(element.get("style") or ""))) for element in tree.xpath("//*[@style]")
    ]
    hiding = {
        element for element, found in inline if any(hides_alone(name, value) for name, value, _ in found)
    }
    first: list[_Rule] = []
    then: list[_Rule] = []
    for rule in _rules(tree, styles, hides_alone):
        hides = any(hides_alone(name, value) for name, value, _ in rule.declarations)
        (first if hides else then).append(rule)
    matcher = _Matcher(tree)
    matched: list[tuple[_Rule, list[etree._Element]]] = []
    for rule in first:
        elements = matcher.select(rule)
        if elements is None:
            styles.cut_short = True
            break
        matched.append((rule, elements))
        hiding.update(elements)
    inside, holding = matcher.around(hiding)
    for rule in then if not styles.cut_short else ():
        # What an element may hide needs its own declarations, those of what holds it for the
        # background behind it, those of what it holds for a font or a colour of their own.
        names = {name for name, _, _ in rule.declarations}
        within = hiding | (holding if names & _BEHIND else set()) | (inside if names & _INHERITED else set())
        elements = matcher.select(rule, within)
        if elements is None:
            styles.cut_short = True
            break
        matched.append((rule, elements))
    for rule, elements in matched:
        for element in elements:
            for name, value, important in rule.declarations:
                # Levels: a stylesheet's (0), an inline style's (1), !important ones (2 and 3).
                _apply(ranked[element], name, value, (2 * important, *rule.specificity, rule.order))
    for element, found in inline:
        for name, value, important in found:
            _apply(ranked[element], name, value, (2 * important + 1, 0, 0, 0, 0))
    styles.declared = {
        element: {name: won[1] for name, won in props.items()} for element, props in ranked.items()
    }
    return styles


def _apply(props: dict[str, tuple[Rank, Value]], name: str, value: Value, rank: Rank) -> None:
    if name not in props or rank >= props[name][0]:
        props[name] = (rank, value)


def _rules(
    tree: lxml.html.HtmlElement, styles: PageStyles, hides_alone: Callable[[str, Value], bool]
) -> Iterator[_Rule]:
    """The page's rules, one for each selector, in the cascade's order. A rule that may not apply
    keeps only what does not hide: one inside ``@media`` with a condition (what shows on one
    screen shows on another), or in a ``<style>`` an external stylesheet comes after (it may undo
    the rule, and sift never reads it)."""
    sheets = tree.xpath("//style[not(ancestor::template)] | " + _EXTERNAL[2:])
    styles.external = any(sheet.tag == "link" for sheet in sheets)
    budget, order = MAX_CSS_CHARS, 0
    for at, element in enumerate(sheets):
        media = _media(element.get("media") or "")
        css = (element.text or "")[:budget] if element.tag == "style" else ""
        budget -= len(css)
        if media is None or not css:
            continue
        undone = any(sheet.tag == "link" or "@import" in (sheet.text or "") for sheet in sheets[at + 1 :])
        for prelude, content, certain in _qualified_rules(tinycss2.parse_stylesheet(css, True, True), styles):
            applies = certain and media and not undone
            declarations = tuple(d for d in _declarations(content) if applies or not hides_alone(d[0], d[1]))
            if not declarations:
                continue
            for parts, key, specificity in _selectors(tinycss2.serialize(prelude)):
                order += 1
                needs = frozenset(
                    need for _, test in parts if isinstance(test, _Simple) for need in test.needs()
                )
                yield _Rule(parts, key, needs, specificity, order, declarations)


def _media(query: str) -> bool | None:
    """Whether a media query holds on every screen (True), on some (False), or never (None: print,
    speech)."""
    query = " ".join(query.lower().split())
    if query in _MEDIA_SHOWN:
        return True
    return None if query.startswith(("print", "speech", "only print")) else False


def _qualified_rules(
    rules: list[Any], styles: PageStyles, certain: bool = True
) -> Iterator[tuple[Value, Value, bool]]:
    for rule in rules:
        if rule.type == "qualified-rule":
            yield rule.prelude, rule.content, certain
        elif rule.type == "at-rule" and rule.lower_at_keyword == "import":
            styles.external = True
        elif rule.type == "at-rule" and rule.content is not None:
            keyword = rule.lower_at_keyword
            media = _media(tinycss2.serialize(rule.prelude)) if keyword == "media" else certain
            if keyword in _BLOCK_RULES or (keyword == "media" and media is not None):
                nested = tinycss2.parse_rule_list(rule.content, True, True)
                yield from _qualified_rules(nested, styles, certain and media is True)


def _declarations(content: Value | str) -> Iterator[tuple[str, Value, bool]]:
    """The declarations of a block (or a ``style`` attribute) of the properties that matter, the
    shorthands among them spread to their longhands."""
    for item in tinycss2.parse_blocks_contents(content, skip_comments=True, skip_whitespace=True):
        if item.type != "declaration":
            continue
        value = [token for token in item.value if token.type not in ("whitespace", "comment")]
        name = item.lower_name
        if name in PROPERTIES:
            yield name, value, item.important
        elif name in _SHORTHANDS:
            for longhand, part in _longhands(name, value):
                yield longhand, part, item.important


def _longhands(name: str, value: Value) -> Iterator[tuple[str, Value]]:
    """What a shorthand sets of ``PROPERTIES``: the top and left sides of a margin, padding or
    inset, both overflows, a background's colour, a font's size."""
    parts = [token for token in value if token.type != "literal" or token.value == "/"]
    if name in ("margin", "padding", "inset"):
        sides = [token for token in parts if token.type != "literal"]
        if sides:
            left = sides[3] if len(sides) == 4 else sides[1] if len(sides) > 1 else sides[0]
            prefix = "" if name == "inset" else name + "-"
            yield prefix + "top", [sides[0]]
            yield prefix + "left", [left]
    elif name == "overflow" and parts:
        yield "overflow-x", parts[:1]
        yield "overflow-y", parts[-1:]
    elif name == "background":
        # An image or a gradient behind the text is no colour to compare the text's with.
        images = [
            token for token in parts if token.type in ("url", "function") and parse_color(token) is None
        ]
        colours = [token for token in parts if parse_color(token) is not None]
        yield "background-color", images[:1] or colours[-1:] or [ast.IdentToken(0, 0, "transparent")]
    elif name == "font":
        for index, token in enumerate(parts):
            slash_next = index + 1 < len(parts) and parts[index + 1].type == "literal"
            if token.type in ("dimension", "percentage", "number", "function") or slash_next:
                yield "font-size", [token]
                return


def _selectors(text: str) -> Iterator[tuple[tuple[Test, ...], tuple[str, str], tuple[int, int, int]]]:
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
        yield tests, _key(parts[0][1]), selector.specificity()


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


class _Matcher:
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

    def select(self, rule: _Rule, within: set[etree._Element] | None = None) -> list[etree._Element] | None:
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
