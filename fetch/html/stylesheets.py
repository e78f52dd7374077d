"""The page's own styles, as a served page declares them: its ``<style>`` elements and ``style``
attributes, parsed with tinycss2 (comments, escapes and ``!important`` as a browser reads them),
their selectors matched by ``selector_matching.py``, and the cascade worked out for the
properties that can hide text.

Nothing is ever fetched: a ``<link rel="stylesheet">`` or an ``@import`` only tells that the page
has styles sift does not see (``PageStyles.external``). A rule that may not apply keeps only what
shows: one inside ``@media`` with a condition (what shows on one screen shows on another), one an
external stylesheet after it may undo. ``:hover`` and the like match nothing (cssselect), and
custom properties (``var()``) are not resolved.

Matching shares ``MATCH_WORK`` steps a page: a hostile page of many rules over many elements
cannot spend the fetch's deadline. Rules that could hide on their own are matched first, the
others only where they matter; past the cap the rest are not applied, and
``PageStyles.cut_short`` says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import lxml.html
import tinycss2
from lxml import etree
from tinycss2 import ast
from tinycss2.color3 import parse_color

from fetch.html.selector_matching import Matcher, Selector, parse_selectors

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


@dataclass(frozen=True, eq=False)
class _Rule:
    selector: Selector
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
    matcher = Matcher(tree)
    matched: list[tuple[_Rule, list[etree._Element]]] = []
    for rule in first:
        elements = matcher.select(rule.selector)
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
        elements = matcher.select(rule.selector, within)
        if elements is None:
            styles.cut_short = True
            break
        matched.append((rule, elements))
    for rule, elements in matched:
        for element in elements:
            for name, value, important in rule.declarations:
                # Levels: a stylesheet's (0), an inline style's (1), !important ones (2 and 3).
                _apply(ranked[element], name, value, (2 * important, *rule.selector.specificity, rule.order))
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
            for selector in parse_selectors(tinycss2.serialize(prelude)):
                order += 1
                yield _Rule(selector, order, declarations)


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
