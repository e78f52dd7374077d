"""What a served page's declared styles hide (``stylesheets.py`` gives them, ``hidden.py`` drops what
is hidden): the values of CSS a browser would compute, read from tinycss2's tokens.

Hidden means a reader cannot see it: not displayed or not visible; a font too small to read
(under ``TINY_FONT_PX``, ``calc()`` worked out); off the page by ``OFF_SCREEN_PX`` or more, by a
positioned element's ``left`` or ``top``, a ``text-indent``, a margin not given back by padding (a
grid row's small negative margin is not), or a ``translate``; shrunk to nothing by ``scale(0)``
(unless an animation, or a transition and a script, brings it in); clipped to nothing (``clip``
on a positioned element, ``clip-path``); a box of at most 1 px that clips its overflow; text in a
transparent colour, or the colour of what is behind it (the nearest background declared, else the
white canvas of a page without styles sift does not read). A font size or a colour is judged
where it is declared, and only when nothing inside declares a readable one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lxml import etree
from tinycss2 import ast
from tinycss2.color3 import RGBA, parse_color

from fetch.html.stylesheets import PageStyles, Value

# As far before the page's start as a reader never scrolls, in CSS pixels.
OFF_SCREEN_PX = 1000
TINY_FONT_PX = 1.0
# A box this small (the "screen reader only" pattern's 1 px) that clips its overflow shows nothing.
NOTHING_PX = 1.0
# Two colours this close in each channel (of 255) are the same to a reader.
SAME_COLOUR = 8 / 255
_UNIT_PX = {
    "px": 1.0, "em": 16.0, "rem": 16.0, "ex": 8.0, "ch": 8.0, "pt": 4 / 3, "pc": 16.0,
    "in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4, "q": 96 / 101.6, "vw": 10.0, "vh": 10.0,
    "vmin": 10.0, "vmax": 10.0,
}  # fmt: skip
_WHITE = RGBA(1.0, 1.0, 1.0, 1.0)
_HIDING_SHAPES = ("circle", "ellipse")
_MATHS: dict[str, Callable[[list[float]], float]] = {
    "calc": lambda values: values[0],
    "min": min,
    "max": max,
    "clamp": lambda values: max(values[0], min(values[1], values[-1])),
}


def px(value: Value, *, percent_of: float | None = None) -> float | None:
    """A single length (or ``calc()``, ``min()``, ``max()``, ``clamp()`` of lengths) in pixels;
    None when it is not one or depends on what is not known."""
    if len(value) != 1:
        return None
    return _length(value[0], percent_of)


def _length(token: ast.Node, percent_of: float | None) -> float | None:
    if token.type == "number":
        return 0.0 if token.value == 0 else None
    if token.type == "dimension":
        scale = _UNIT_PX.get(token.lower_unit)
        return None if scale is None else token.value * scale
    if token.type == "percentage":
        return None if percent_of is None else token.value * percent_of / 100
    if token.type == "() block":
        return _sum(token.content, percent_of)
    if token.type == "function" and token.lower_name in _MATHS:
        arguments = [_sum(part, percent_of) for part in _split(token.arguments, ",")]
        known = [value for value in arguments if value is not None]
        if known and len(known) == len(arguments):
            return _MATHS[token.lower_name](known)
    return None


def _split(tokens: Iterable[ast.Node], separator: str) -> list[list[ast.Node]]:
    parts: list[list[ast.Node]] = [[]]
    for token in tokens:
        if token.type == "literal" and token.value == separator:
            parts.append([])
        elif token.type not in ("whitespace", "comment"):
            parts[-1].append(token)
    return parts


def _sum(tokens: list[ast.Node], percent_of: float | None) -> float | None:
    """A ``calc()`` expression: terms added and taken away, each a product of factors."""
    total, sign, term, operator = 0.0, 1.0, None, "*"
    for token in [*tokens, None]:
        if token is None or (token.type == "literal" and token.value in "+-" and term is not None):
            if term is None:
                return None
            total += sign * term
            sign, term, operator = (-1.0 if token is not None and token.value == "-" else 1.0), None, "*"
        elif token.type == "literal" and token.value in "*/":
            operator = token.value
        else:
            factor = token.value if token.type == "number" else _length(token, percent_of)
            if factor is None:
                return None
            if term is None:
                term = factor
            elif operator == "*":
                term *= factor
            else:
                term = term / factor if factor else None
                if term is None:
                    return None
    return total


def _ident(value: Value | None) -> str:
    return value[0].lower_value if value and len(value) == 1 and value[0].type == "ident" else ""


def hides_alone(name: str, value: Value) -> bool:
    """Whether one declaration may hide its element without any other (its rule matters first)."""
    judge = _ALONE.get(name)
    return judge is not None and judge(value)


def _far_back(value: Value) -> bool:
    length = px(value)
    return length is not None and length <= -OFF_SCREEN_PX


def _nothing(value: Value) -> bool:
    length = px(value)
    return length is not None and length <= NOTHING_PX


def _invisible_colour(value: Value) -> bool:
    """Transparent, or the white of the canvas behind a page that declares no background."""
    colour = _colour(value)
    return colour is not None and (colour.alpha == 0 or _same(colour, _WHITE))


def _tiny_font(value: Value) -> bool:
    size = px(value, percent_of=16.0)
    return size is not None and size < TINY_FONT_PX


@dataclass(frozen=True)
class Readable:
    """The elements inside which some element declares a readable font size, or a visible colour,
    of its own: a tiny font or a hiding colour declared on one of them hides it not all."""

    font: frozenset[etree._Element]
    colour: frozenset[etree._Element]


def readable_inside(styles: PageStyles) -> Readable:
    font: set[etree._Element] = set()
    colour: set[etree._Element] = set()
    for element, declared in styles.declared.items():
        size, shade = declared.get("font-size"), _colour(declared.get("color"))
        for found, readable in ((font, size and not _tiny_font(size)), (colour, shade and shade.alpha > 0)):
            if not readable:
                continue
            for around in element.iterancestors():
                if around in found:
                    break
                found.add(around)
    return Readable(frozenset(font), frozenset(colour))


def style_hides(element: etree._Element, styles: PageStyles, *, scripted: bool, readable: Readable) -> bool:
    """Whether ``element``'s declared styles hide it; ``scripted`` when the page has a script."""
    declared = styles.declared.get(element)
    if not declared:
        return False
    get = declared.get
    positioned = _ident(get("position")) in ("absolute", "fixed")
    transform = _transform_hides(get("transform") or [])
    clips = {_ident(get("overflow-x")), _ident(get("overflow-y"))} & {"hidden", "clip"}
    reasons = (
        lambda: (
            hides_alone("display", get("display") or []) or hides_alone("visibility", get("visibility") or [])
        ),
        lambda: _tiny_font(get("font-size") or []) and element not in readable.font,
        lambda: element not in readable.colour and _colour_hides(element, styles),
        lambda: positioned and any(_far_back(get(side) or []) for side in ("left", "top")),
        lambda: _far_back(get("text-indent") or []) or _off_by_margin(declared),
        lambda: transform == "translate" or (transform == "scale" and not _animated_in(declared, scripted)),
        lambda: (positioned and _clipped(get("clip") or [])) or _clip_path_hides(get("clip-path") or []),
        lambda: (
            bool(clips)
            and any(_nothing(get(size) or []) for size in ("height", "max-height", "width", "max-width"))
        ),
    )
    return any(reason() for reason in reasons)


def _off_by_margin(declared: dict[str, Value]) -> bool:
    """A margin that far back, unless padding gives it back (a background bled to the edge)."""
    for side in ("left", "top"):
        margin = px(declared.get("margin-" + side) or [])
        padding = px(declared.get("padding-" + side) or []) or 0.0
        if margin is not None and margin + max(padding, 0.0) <= -OFF_SCREEN_PX:
            return True
    return False


def _animated_in(declared: dict[str, Value], scripted: bool) -> bool:
    """A ``scale(0)`` that an animation, or a transition a script starts, grows into view."""
    moving = [_ident(declared.get(name)) for name in ("animation", "animation-name") if name in declared]
    transitions = [_ident(declared.get(n)) for n in ("transition", "transition-property") if n in declared]
    return any(name != "none" for name in moving) or (
        scripted and any(name != "none" for name in transitions)
    )


def _transform_hides(value: Value) -> str | None:
    """ "translate" when a translation moves the element that far back, "scale" when a scale
    shrinks it to nothing, else None."""
    for token in value:
        if token.type != "function":
            continue
        arguments = [
            px(part) if token.lower_name.startswith("translate") else _number(part)
            for part in _split(token.arguments, ",")
        ]
        name = token.lower_name
        if name in ("translate", "translatex", "translatey", "translate3d"):
            if any(length is not None and length <= -OFF_SCREEN_PX for length in arguments[:2]):
                return "translate"
        elif name in ("scale", "scalex", "scaley", "scale3d") and any(
            factor == 0 for factor in arguments[:2]
        ):
            return "scale"
    return None


def _number(value: Value) -> float | None:
    return value[0].value if len(value) == 1 and value[0].type == "number" else None


def _clipped(value: Value) -> bool:
    """``clip: rect(top, right, bottom, left)`` leaving at most 1 px either way (``auto`` is the edge)."""
    if len(value) != 1 or value[0].type != "function" or value[0].lower_name != "rect":
        return False
    sides = [part for part in _split(value[0].arguments, ",") if part]
    if len(sides) == 1:  # the old form, without commas
        sides = [[token] for token in sides[0]]
    if len(sides) != 4:
        return False
    top, right, bottom, left = (None if _ident(side) == "auto" else px(side) for side in sides)
    narrow = right is not None and right - (left or 0.0) <= NOTHING_PX
    low = bottom is not None and bottom - (top or 0.0) <= NOTHING_PX
    return narrow or low


def _clip_path_hides(value: Value) -> bool:
    """``inset()`` of half or more from both sides, or a circle or an ellipse of no radius."""
    if not value or value[0].type != "function":
        return False
    name, arguments = (
        value[0].lower_name,
        [t for t in value[0].arguments if t.type not in ("whitespace", "comment")],
    )
    if name == "inset":
        sides = [t for t in arguments if t.type != "ident"][:4]
        if not sides or any(t.type != "percentage" for t in sides):
            return False
        insets: list[float] = [t.value for t in sides]
        top = insets[0]
        right = insets[1] if len(insets) > 1 else top
        bottom = insets[2] if len(insets) > 2 else top
        left = insets[3] if len(insets) > 3 else right
        return top + bottom >= 100 or right + left >= 100
    return name in _HIDING_SHAPES and bool(arguments) and px([arguments[0]]) == 0


def _colour(value: Value | None) -> RGBA | None:
    if not value or len(value) != 1:
        return None
    colour = parse_color(value[0])
    return colour if isinstance(colour, RGBA) else None


def _colour_hides(element: etree._Element, styles: PageStyles) -> bool:
    """Text in a transparent colour, or in the colour of the nearest background behind it."""
    colour = _colour(styles.declared[element].get("color"))
    if colour is None:
        return False
    if colour.alpha == 0:
        return True
    background = _background(element, styles)
    return background is not None and _same(colour, background)


def _same(colour: RGBA, other: RGBA) -> bool:
    return all(abs(a - b) <= SAME_COLOUR for a, b in zip(colour[:3], other[:3], strict=True))


def _background(element: etree._Element, styles: PageStyles) -> RGBA | None:
    """The nearest opaque background declared at or around ``element``; the white canvas when
    none is and the page has no styles sift does not read; None when it cannot be told (an image,
    an unknown value, a half-transparent colour)."""
    for around in (element, *element.iterancestors()):
        declared = styles.declared.get(around, {})
        image = declared.get("background-image")
        if image and _ident(image) != "none":
            return None
        value = declared.get("background-color")
        if not value:
            continue
        colour = _colour(value)
        if colour is not None and colour.alpha == 0:
            continue
        return colour if colour is not None and colour.alpha == 1 else None
    return None if styles.external else _WHITE


# What hides_alone asks of each property.
_ALONE: dict[str, Callable[[Value], bool]] = {
    "display": lambda value: _ident(value) == "none",
    "visibility": lambda value: _ident(value) in ("hidden", "collapse"),
    "font-size": _tiny_font,
    **dict.fromkeys(("left", "top", "text-indent", "margin-left", "margin-top"), _far_back),
    **dict.fromkeys(("height", "max-height", "width", "max-width"), _nothing),
    "clip": _clipped,
    "clip-path": _clip_path_hides,
    "transform": lambda value: _transform_hides(value) is not None,
    "color": _invisible_colour,
}
