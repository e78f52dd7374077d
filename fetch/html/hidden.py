"""Text a reader of the page cannot see, dropped from a parsed page before its text is extracted.

Hidden text is the usual carrier of instructions meant for an agent and not for people, so it
never reaches the content unless the caller asks for it (docs/fetch-content.md, "Hidden text").
A served page is judged by its markup alone: the ``hidden`` attribute, ``aria-hidden="true"``,
an inline style that hides (``display:none``, ``visibility:hidden``/``collapse``,
``font-size:0``, absolute or fixed positioning far off the screen), ``<template>``. A rendered
page is judged by the browser, which marks each element its computed style hides with
``MARK`` (``hidden_marks.js``, run in the page before its DOM is read). What a reader opens with
a click stays: ``<details>``, a tab's panel (``role="tabpanel"``), the panel a control names in
``aria-controls`` (an accordion's answer), the panel of an accordion's item (one of a run of
items built alike, each a visible head that is a control, a button, and the panel after it,
hidden by ``display:none`` or ``hidden``: a product's description and specifications), and
a block holding every ``<h1>`` of the page (the page's content, which a script shows once it has
loaded); ``opacity:0`` alone does not hide (pages fade their text in). Comments never are page
text: they go whatever is asked.

The sandbox child imports this module with ``main_content``: standard library and lxml only.
"""

from __future__ import annotations

import re

import lxml.html
from lxml import etree

# Set by hidden_marks.js on every element the browser's computed style hides.
MARK = "data-sift-hidden"
# An inline style hides when one of its declarations says so; "!important" changes nothing here.
_HIDING_STYLE = re.compile(
    r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse)|font-size\s*:\s*0(?:\.0*)?(?:[a-z%]+)?)"
    r"\s*(?:!\s*important\s*)?(?:;|$)",
    re.IGNORECASE,
)
_POSITIONED = re.compile(r"(?:^|;)\s*position\s*:\s*(?:absolute|fixed)\b", re.IGNORECASE)
# A positioned element's left or top this far before the page's start (in px, em or rem) puts it
# off the screen, where no scrolling reaches; so does a text-indent that far back.
_OFF_SCREEN = re.compile(
    r"(?:^|;)\s*(left|top|text-indent)\s*:\s*-\s*(\d+(?:\.\d+)?)(px|em|rem)\b", re.IGNORECASE
)
OFF_SCREEN_PX = 1000
_EM_PX = 16
# The only elements that can be hidden, found by libxml2 rather than a walk in Python (which
# makes an object of every element of the page); reached from their attributes, which libxml2
# finds faster than it tests every element for them.
_SERVED_CANDIDATES = "//@hidden/.. | //@aria-hidden/.. | //@style/.. | //template"
_RENDERED_CANDIDATES = f"//@{MARK}/.. | //template"
_SPACES = re.compile(r"\s+")
# An accordion's items are at least this many siblings built alike (_accordion_panel).
ACCORDION_ITEMS = 2
# An accordion's head is a control a reader clicks: a button, or what says it opens something.
_CONTROL = (
    "descendant-or-self::*[self::button or @aria-expanded or translate(@role, 'BUTON', 'buton')='button']"
)
_STREAMED_SEGMENT = re.compile(r"(?:^|[^A-Za-z0-9])S:[0-9a-f]+$")
# Text inside these is never reader text, hidden or not: it is not counted as hidden text.
_NOT_TEXT = ("script", "style", "noscript")


def drop_hidden(tree: lxml.html.HtmlElement, *, rendered: bool, keep: bool = False) -> int:
    """Remove what a reader cannot see from ``tree``; the characters of text removed.

    With ``keep``, only comments go (and nothing is counted): the caller wants hidden text.
    """
    dropped = 0
    for comment in tree.xpath("//comment() | //processing-instruction()"):
        if not keep:
            dropped += len(_SPACES.sub(" ", comment.text or "").strip())
        _remove(comment)
    if keep:
        return 0
    for element in _hidden_elements(tree, rendered=rendered):
        dropped += _text_chars(element)
        _remove(element)
    return dropped


def _hidden_elements(tree: lxml.html.HtmlElement, *, rendered: bool) -> list[lxml.html.HtmlElement]:
    """The outermost hidden elements, in document order (an element inside one goes with it).
    What a reader opens (``<details>``, a tab's panel, what a control names) is not one of them,
    though an element inside it may be."""
    controlled = _controlled_ids(tree)
    candidates = tree.xpath(_RENDERED_CANDIDATES if rendered else _SERVED_CANDIDATES)
    hidden = [
        element
        for element in candidates
        if _is_hidden(element, rendered=rendered)
        and not _opened_by_reader(element, controlled, rendered=rendered)
    ]
    headings = 0 if rendered else len(tree.xpath("//h1"))
    if headings:
        # A hidden block holding every heading of a page as served is the page, which a script
        # shows once it has loaded (in the browser, the script has run: what it hides is hidden).
        hidden = [element for element in hidden if len(element.xpath(".//h1")) < headings]
    chosen = set(hidden)
    return [element for element in hidden if not any(up in chosen for up in element.iterancestors())]


def _controlled_ids(tree: lxml.html.HtmlElement) -> frozenset[str]:
    """The ids an element of the page says it opens or shows (``aria-controls``)."""
    return frozenset(name for value in tree.xpath("//@aria-controls") for name in str(value).split())


def _opened_by_reader(element: lxml.html.HtmlElement, controlled: frozenset[str], *, rendered: bool) -> bool:
    """Hidden or not, a reader opens it with a click: a ``<details>``, a tab's panel, the
    panel a button names in ``aria-controls``, an accordion's panel."""
    return (
        element.tag == "details"
        or (element.get("role") or "").strip().lower() == "tabpanel"
        or (element.get("id") or "") in controlled
        or _accordion_panel(element, rendered=rendered)
    )


def _accordion_panel(element: lxml.html.HtmlElement, *, rendered: bool) -> bool:
    """The panel of an accordion's item: right after a visible head that is a control and no link
    (a "Description" button, an element with ``aria-expanded``), in an item that is one of a run
    of siblings of the same tag and first class. Hidden by ``aria-hidden`` alone it is not (that
    marks a decorative copy), nor inside a ``<nav>`` or ``<header>`` (a menu's drop-downs)."""
    if (element.get("aria-hidden") or "").strip().lower() == "true":
        return False
    head = element.getprevious()
    while head is not None and head.tag in _NOT_TEXT:
        head = head.getprevious()
    item = element.getparent()
    if head is None or item is None or item.getparent() is None or not isinstance(head.tag, str):
        return False
    if _is_hidden(head, rendered=rendered) or not head.text_content().strip() or head.tag == "a":
        return False
    if head.xpath(".//a[@href]") or element.xpath("ancestor::nav or ancestor::header"):
        return False
    if not head.xpath(_CONTROL):
        return False
    kind = _kind(item)
    return bool(kind[1]) and sum(1 for peer in item.getparent() if _kind(peer) == kind) >= ACCORDION_ITEMS


def _kind(element: lxml.html.HtmlElement) -> tuple[object, str]:
    classes = (element.get("class") or "").split() if isinstance(element.tag, str) else []
    return element.tag, classes[0] if classes else ""


def _is_hidden(element: lxml.html.HtmlElement, *, rendered: bool) -> bool:
    if element.tag == "template":
        return True
    if rendered:
        return element.get(MARK) is not None
    if element.get("hidden") is not None:
        return not _revealed_by_script(element)
    if (element.get("aria-hidden") or "").strip().lower() == "true":
        return True
    style = element.get("style")
    return bool(style) and hides(style)


def _revealed_by_script(element: lxml.html.HtmlElement) -> bool:
    """A ``hidden`` element a reader sees all the same: found by the browser's find in page
    (``hidden="until-found"``), or a segment React streams hidden and moves into the page as it
    loads (``<div hidden id="S:1">``, the content of most pages built with Next.js)."""
    return element.get("hidden", "").strip().lower() == "until-found" or bool(
        _STREAMED_SEGMENT.search(element.get("id") or "")
    )


def hides(style: str) -> bool:
    """Whether an inline ``style`` hides its element's text from a reader."""
    if _HIDING_STYLE.search(style):
        return True
    positioned = bool(_POSITIONED.search(style))
    for match in _OFF_SCREEN.finditer(style):
        pixels = float(match[2]) * (1 if match[3].lower() == "px" else _EM_PX)
        if pixels >= OFF_SCREEN_PX and (positioned or match[1].lower() == "text-indent"):
            return True
    return False


def _text_chars(element: lxml.html.HtmlElement) -> int:
    if element.tag in _NOT_TEXT:
        return 0
    texts = element.xpath(".//text()[not(ancestor::script or ancestor::style or ancestor::noscript)]")
    return len(_SPACES.sub(" ", "".join(str(text) for text in texts)).strip())


def _remove(node: etree._Element) -> None:
    """Remove ``node`` but not the text after it, which belongs to its parent."""
    parent = node.getparent()
    if parent is None:
        return
    tail = node.tail
    if tail:
        previous = node.getprevious()
        if previous is not None:
            previous.tail = (previous.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(node)
