"""The page's own styles, as a served page declares them: its ``<style>`` elements and ``style``
attributes, parsed with tinycss2 (comments, escapes and ``!important`` as a browser reads them),
their selectors matched by ``selector_matching.py``, and the cascade worked out for the
properties that can hide text.

Nothing is ever fetched: a ``<link rel="stylesheet">`` or an ``@import`` only tells that the page
has styles sift does not see (``PageStyles.external``). A rule that may not apply keeps only what
shows: one inside ``@media`` with a condition (what shows on one screen shows on another), one an
external stylesheet after it may undo. ``:hover`` and the like match nothing (cssselect), and
custom properties (``var()``) are not resolved.

A quick scan (comments and strings known) cuts the CSS into rules; a rule whose selectors name,
on their right, a tag, a class or an id the page lacks is set aside unread, and tinycss2 reads a
rule's block only when it may hide or when its selector may match near what may be hidden, so most
of a page's CSS is never tokenized. Matching shares ``MATCH_WORK`` steps a page: a hostile page of
many rules over many elements cannot spend the fetch's deadline. Rules that could hide on their
own are matched first, the others only where they matter; past the cap the rest are not
applied, and ``PageStyles.cut_short`` says so.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

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
_READ = PROPERTIES | _SHORTHANDS
_MEDIA_SHOWN = frozenset({"", "all", "screen", "only screen"})
_BLOCK_RULES = frozenset({"supports", "layer", "document", "scope"})
# The scan of a stylesheet: comments, strings, braces and semicolons.
_LEXEME = re.compile(r"/\*.*?(?:\*/|\Z)|\"(?:\\.|[^\"\\])*\"?|'(?:\\.|[^'\\])*'?|[{};]", re.S)
_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)", re.S)
# A tag, a class or an id of a compound selector, to its end (an escape is never read here).
_SIMPLE_NAME = r"[^\s.#:\[\]()>+~,|\\*]+"
_TAG = re.compile(rf"{_SIMPLE_NAME}|")
_BACKGROUND = re.compile(r"(?<![\w-])background(?:-color|-image)?\s*:", re.IGNORECASE)
_FONT_OR_COLOUR = re.compile(r"(?<![\w-])(?:font-size|font|color)\s*:", re.IGNORECASE)
_NAMED = re.compile(rf"[.#]{_SIMPLE_NAME}")
# What a block that may hide holds: a superset of what style_hiding.hides_alone finds, so that the
# rest of the page's CSS need not be read unless it may match near what may be hidden.
_TINY = r"(?<![\w.#-])(?:0*\.0|0(?![.\d])|0*\.\d*px|calc\(|min\(|max\(|clamp\(|\d(?:\.\d*)?%)"
_FAR_BACK = r"-\s*(?:\d{3}|\d{2}(?:\.\d*)?(?:r?em|v[wh]|vmin|vmax|cm|in|pc|ch|ex))|calc\(|min\(|max\(|clamp\("
_MAY_HIDE = re.compile(
    r"display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse)"
    rf"|font-size\s*:\s*{_TINY}|font\s*:[^;}}]*?{_TINY}"
    rf"|(?:left|top|indent|margin|inset|translate)[^;}}]*(?:{_FAR_BACK})"
    r"|(?<![\w-])(?:max-)?(?:height|width)\s*:\s*(?:0|1px|\.|[a-z-]+\()"
    r"|(?<![\w-])clip(?:-path)?\s*:|scale\w*\(\s*0*\.?0*\s*[,)]"
    r"|(?<![\w-])color\s*:\s*(?:transparent|white|#f[0-9a-f]{2,7}\b|#[0-9a-f]{3}0\b|#[0-9a-f]{6}00\b"
    r"|rgba?\([^)]*(?:[,/]\s*0*\.?0*%?\s*\)|25\d)|hsla?\()"
)
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
    matcher = Matcher(tree)
    # A rule whose every selector names, on its right, a tag, a class or an id the page lacks
    # matches nothing: it is never read further.
    on_page = matcher.names()
    units = [unit for unit in _page_units(tree, styles) if unit.may_match(on_page)]
    for rule in _rules([unit for unit in units if unit.may_hide], hides_alone):
        hides = any(hides_alone(name, value) for name, value, _ in rule.declarations)
        (first if hides else then).append(rule)
    matched: list[tuple[_Rule, list[etree._Element]]] = []
    for rule in first:
        elements = matcher.select(rule.selector)
        if elements is None:
            styles.cut_short = True
            break
        matched.append((rule, elements))
        hiding.update(elements)
    inside, holding = matcher.around(hiding)
    near = [{name for element in group for name in _names(element)} for group in (hiding, holding, inside)]
    then += _rules([unit for unit in units if not unit.may_hide and unit.may_matter(*near)], hides_alone)
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


@dataclass(frozen=True)
class _Unit:
    """A rule of a ``<style>`` as a quick scan finds it, before tinycss2 reads its block (most of a
    page's CSS is never read further: only what may hide, and what may match near it)."""

    prelude: str
    block: str
    applies: bool  # False: it may not apply, and keeps only what shows
    order: int
    may_hide: bool  # its block may hide an element (or holds what only tinycss2 reads right)

    def may_matter(self, hiding: set[str], holding: set[str], inside: set[str]) -> bool:
        """Whether it may match what may be hidden, what holds it (for a background) or what it
        holds (for a font or a colour), each given by the names of its elements."""
        return (
            self.may_match(hiding)
            or (bool(_BACKGROUND.search(self.block)) and self.may_match(holding))
            or (bool(_FONT_OR_COLOUR.search(self.block)) and self.may_match(inside))
        )

    def may_match(self, names: set[str]) -> bool:
        """Whether a selector of it may match an element with one of ``names`` (``.class``,
        ``#id``) or any element (a rightmost part without a class or an id)."""
        for selector in self.prelude.split(","):
            if any(mark in selector for mark in "([\\|"):
                return True
            last = re.split(r"[\s>+~]+", selector.strip())[-1]
            found = _NAMED.findall(last) or [_TAG.match(last)[0].lower()]  # type: ignore[index]
            if found == [""] or any(name in names for name in found):
                return True
        return False


def _page_units(tree: lxml.html.HtmlElement, styles: PageStyles) -> Iterator[_Unit]:
    """The rules of the page's ``<style>`` elements in the cascade's order. A rule may not apply
    inside ``@media`` with a condition (what shows on one screen shows on another), or in a
    ``<style>`` an external stylesheet comes after (it may undo the rule, and sift never reads
    it)."""
    sheets = tree.xpath("//style[not(ancestor::template)] | " + _EXTERNAL[2:])
    styles.external = any(sheet.tag == "link" for sheet in sheets)
    budget, order = MAX_CSS_CHARS, itertools.count()
    for at, element in enumerate(sheets):
        media = _media(element.get("media") or "")
        css = (element.text or "")[:budget] if element.tag == "style" else ""
        budget -= len(css)
        if media is None or not css:
            continue
        undone = any(sheet.tag == "link" or "@import" in (sheet.text or "") for sheet in sheets[at + 1 :])
        yield from _units(css, bool(media) and not undone, order, styles)


def _units(css: str, applies: bool, order: Iterator[int], styles: PageStyles) -> Iterator[_Unit]:
    """Each qualified rule of ``css``, inside ``@media``, ``@supports`` and ``@layer`` too, found by
    a scan that knows comments and strings; at-rules without selectors (``@font-face``,
    ``@keyframes``) are left out."""
    depth, start, opened = 0, 0, 0
    for lexeme in _LEXEME.finditer(css):
        found = lexeme.group()
        if found == "{":
            depth += 1
            if depth == 1:
                opened = lexeme.end()
        elif found == "}" and depth:
            depth -= 1
            if depth == 0:
                prelude = _COMMENT.sub("", css[start : opened - 1]).strip()
                yield from _unit(prelude, css[opened : lexeme.start()], applies, order, styles)
                start = lexeme.end()
        elif found in ";}" and depth == 0:
            if css[start : lexeme.start()].strip().lower().startswith("@import"):
                styles.external = True
            start = lexeme.end()


def _unit(
    prelude: str, block: str, applies: bool, order: Iterator[int], styles: PageStyles
) -> Iterator[_Unit]:
    if not prelude.startswith("@"):
        may_hide = bool(_MAY_HIDE.search(block.lower())) or "\\" in block or "/*" in block
        yield _Unit(prelude, block, applies, next(order), may_hide)
        return
    keyword, _, query = prelude[1:].partition(" ")
    keyword = keyword.lower()
    media = _media(query) if keyword == "media" else True
    if keyword in _BLOCK_RULES or (keyword == "media" and media is not None):
        yield from _units(block, applies and media is True, order, styles)


def _rules(units: list[_Unit], hides_alone: Callable[[str, Value], bool]) -> list[_Rule]:
    """The rules of ``units``, one for each selector; a unit that may not apply keeps only what
    does not hide."""
    rules = []
    for unit in units:
        declarations = tuple(
            found
            for found in _declarations(unit.block)
            if unit.applies or not hides_alone(found[0], found[1])
        )
        if declarations:
            rules += [_Rule(selector, unit.order, declarations) for selector in parse_selectors(unit.prelude)]
    return rules


def _names(element: etree._Element) -> Iterator[str]:
    yield element.tag
    yield from ("." + name for name in (element.get("class") or "").split())
    if element.get("id"):
        yield "#" + (element.get("id") or "")


def _media(query: str) -> bool | None:
    """Whether a media query holds on every screen (True), on some (False), or never (None: print,
    speech)."""
    query = " ".join(query.lower().split())
    if query in _MEDIA_SHOWN:
        return True
    return None if query.startswith(("print", "speech", "only print")) else False


def _declarations(content: Value | str) -> Iterator[tuple[str, Value, bool]]:
    """The declarations of a block (or a ``style`` attribute) of the properties that matter, the
    shorthands among them spread to their longhands. A block of text without comments, escapes,
    strings or URLs is cut at its semicolons first, so that only what matters is tokenized."""
    if isinstance(content, str) and not any(mark in content for mark in ("/*", "\\", '"', "'", "url(")):
        content = ";".join(part for part in content.split(";") if _property(part) in _READ)
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


def _property(declaration: str) -> str:
    return declaration.partition(":")[0].strip().lower()


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
