"""Text a reader of the page cannot see, dropped from a parsed page before its text is extracted.

Hidden text is the usual carrier of instructions meant for an agent and not for people, so it
never reaches the content unless the caller asks for it (docs/api.md, "Hidden text"). A served
page is judged by its markup and its own styles: the ``hidden`` attribute, ``aria-hidden="true"``,
``<template>``, and what its ``<style>`` elements and ``style`` attributes hide
(``stylesheets.py`` works out the cascade, ``style_hiding.py`` what hides). A rendered page is
judged by the browser, which marks each element its computed style hides with ``MARK``
(``hidden_marks.js``, in a world the page's scripts cannot reach); what ``<noscript>`` holds is
never shown there. What a reader opens with a click stays, when the page shows a way to open it:
``<details>``, the panel a visible control names (a button's ``aria-controls``, a tab's panel by
its ``aria-labelledby``), the panel of an accordion's item (one of a run of items built alike,
each a visible head that is a control, a button, and the panel after it: a product's
description and specifications), and on a page with a script a hidden block holding every
``<h1>`` and a third of the page's text (the page, which the script shows once it has loaded).
Comments never are page text: they go whatever is asked.

The sandbox child imports this module with ``main_content``: standard library, lxml, tinycss2
and cssselect only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import lxml.html
from lxml import etree

from fetch.html.style_hiding import Readable, hides_alone, readable_inside, style_hides
from fetch.html.stylesheets import PageStyles, page_styles

# Set by hidden_marks.js on every element the browser's computed style hides.
MARK = "data-sift-hidden"
# The only elements that can be hidden besides those a style hides, found by libxml2 rather than
# a walk in Python (which makes an object of every element of the page); reached from their
# attributes, which libxml2 finds faster than it tests every element for them.
_SERVED_CANDIDATES = "//@hidden/.. | //@aria-hidden/.. | //template"
_RENDERED_CANDIDATES = f"//@{MARK}/.. | //template | //noscript"
RUNNABLE_SCRIPT = (
    "//script[not(@type) or @type='' or @type='module' or contains(translate(@type, 'JAVSCRIPT', "
    "'javscript'), 'javascript')]"
)
_SPACES = re.compile(r"\s+")
# A block hidden until a script shows it holds at least 1 / PAGE_SHARE of the page's text.
PAGE_SHARE = 3
# An accordion's items are at least this many siblings built alike (_accordion_panel).
ACCORDION_ITEMS = 2
# A control a reader clicks: a button, a link, what says it opens something.
_CONTROL = (
    "descendant-or-self::*[self::button or self::summary or self::a[@href] or @aria-expanded"
    " or translate(@role, 'BUTONA', 'butona')='button' or translate(@role, 'TAB', 'tab')='tab']"
)
_STREAMED_SEGMENT = re.compile(r"(?:^|[^A-Za-z0-9])S:[0-9a-f]+$")
# Text inside these is never reader text, hidden or not: it is not counted as hidden text.
_NOT_TEXT = ("script", "style", "noscript")
_SERVED_TEXT = ".//text()[not(ancestor::script or ancestor::style or ancestor::noscript)]"
_RENDERED_TEXT = ".//text()[not(ancestor::script or ancestor::style)]"


@dataclass
class _Page:
    """What judging one page's elements needs, worked out once."""

    tree: lxml.html.HtmlElement
    rendered: bool
    styles: PageStyles = field(default_factory=PageStyles)
    readable: Readable = field(default_factory=lambda: Readable(frozenset(), frozenset()))
    scripted: bool = False
    judged: dict[etree._Element, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.rendered:
            self.styles = page_styles(self.tree, hides_alone)
            self.readable = readable_inside(self.styles)
            self.scripted = bool(self.tree.xpath(RUNNABLE_SCRIPT))


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
    for element in _hidden_elements(_Page(tree, rendered)):
        dropped += _text_chars(element, rendered=rendered)
        _remove(element)
    return dropped


def _hidden_elements(page: _Page) -> list[lxml.html.HtmlElement]:
    """The outermost hidden elements, in document order (an element inside one goes with it).
    What a reader opens (``<details>``, a tab's panel, what a control names) is not one of them,
    though an element inside it may be."""
    tree = page.tree
    found = set(tree.xpath(_RENDERED_CANDIDATES if page.rendered else _SERVED_CANDIDATES))
    found.update(page.styles.declared)
    candidates = [element for element in tree.iter() if element in found]
    controls = _controls(tree)
    hidden = [
        element
        for element in candidates
        if _is_hidden(element, page) and not _opened_by_reader(element, controls, page)
    ]
    chosen = set(hidden)
    return [element for element in hidden if not any(up in chosen for up in element.iterancestors())]


def _controls(tree: lxml.html.HtmlElement) -> dict[str, list[lxml.html.HtmlElement]]:
    """The elements that say they open or show each id (``aria-controls``, a tab's panel's
    ``aria-labelledby``)."""
    named: dict[str, list[lxml.html.HtmlElement]] = {}
    for control in tree.xpath("//*[@aria-controls]"):
        for name in (control.get("aria-controls") or "").split():
            named.setdefault(name, []).append(control)
    for panel in tree.xpath("//*[@aria-labelledby][@id]"):
        for name in (panel.get("aria-labelledby") or "").split():
            named.setdefault(panel.get("id") or "", []).extend(tree.xpath("//*[@id=$name]", name=name)[:1])
    return named


def _opened_by_reader(element: lxml.html.HtmlElement, controls: dict, page: _Page) -> bool:
    """Hidden or not, a reader opens it with a click: a ``<details>``, a panel that a visible
    control names (a tab's, a button's ``aria-controls``), an accordion's panel, or on a served
    page the page itself, which a script shows once it has loaded."""
    if element.tag in ("details", "noscript"):
        return element.tag == "details"  # what <noscript> holds, a rendered page never shows
    if any(_visible_control(control, page) for control in controls.get(element.get("id") or "", ())):
        return True
    return _accordion_panel(element, page) or _page_shown_by_script(element, page)


def _visible_control(control: lxml.html.HtmlElement, page: _Page) -> bool:
    """A control a reader sees and can click: a button, a tab, a link or what says it expands,
    with a label, neither it nor what holds it hidden."""
    if not control.xpath(_CONTROL) and not control.xpath("self::*[@aria-expanded]"):
        return False
    labelled = control.text_content().strip() or control.get("aria-label") or control.get("title")
    if not labelled and not control.xpath(".//img | .//svg"):
        return False
    return not any(_is_hidden(up, page) for up in (control, *control.iterancestors()))


def _page_shown_by_script(element: lxml.html.HtmlElement, page: _Page) -> bool:
    """On a served page, a hidden block holding every ``<h1>`` and at least a third of the page's
    text (PAGE_SHARE), on a page with a script: the page itself, which the script shows once it
    has loaded (shop apps)."""
    if page.rendered or not page.scripted or not element.xpath(".//h1"):
        return False
    headings = page.tree.xpath("//h1")
    if len(element.xpath(".//h1")) < len(headings):
        return False
    body = page.tree.find("body")
    return PAGE_SHARE * _text_chars(element, rendered=False) >= _text_chars(
        body if body is not None else page.tree, rendered=False
    )


def _accordion_panel(element: lxml.html.HtmlElement, page: _Page) -> bool:
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
    if _is_hidden(head, page) or not head.text_content().strip() or head.tag == "a":
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


def _is_hidden(element: lxml.html.HtmlElement, page: _Page) -> bool:
    known = page.judged.get(element)
    if known is None:
        known = page.judged[element] = _judge(element, page)
    return known


def _judge(element: lxml.html.HtmlElement, page: _Page) -> bool:
    if element.tag == "template":
        return True
    if page.rendered:
        # The browser runs scripts: what <noscript> holds is never shown.
        return element.get(MARK) is not None or element.tag == "noscript"
    if element.get("hidden") is not None:
        return not _revealed_by_script(element)
    if (element.get("aria-hidden") or "").strip().lower() == "true":
        return True
    return style_hides(element, page.styles, scripted=page.scripted, readable=page.readable)


def _revealed_by_script(element: lxml.html.HtmlElement) -> bool:
    """A ``hidden`` element a reader sees all the same: found by the browser's find in page
    (``hidden="until-found"``), or a segment React streams hidden and moves into the page as it
    loads (``<div hidden id="S:1">``, the content of most pages built with Next.js)."""
    return element.get("hidden", "").strip().lower() == "until-found" or bool(
        _STREAMED_SEGMENT.search(element.get("id") or "")
    )


def hides(style: str) -> bool:
    """Whether an inline ``style`` hides its element's text from a reader (on a page of no other
    style)."""
    tree = lxml.html.document_fromstring("<html><body><p>text</p></body></html>")
    paragraph = tree.find(".//p")
    paragraph.set("style", style)
    return _is_hidden(paragraph, _Page(tree, rendered=False))


def _text_chars(element: lxml.html.HtmlElement, *, rendered: bool) -> int:
    """The characters of reader text in ``element``; on a rendered page a ``<noscript>``'s count."""
    if element.tag in _NOT_TEXT and not (rendered and element.tag == "noscript"):
        return 0
    texts = element.xpath(_RENDERED_TEXT if rendered else _SERVED_TEXT)
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
