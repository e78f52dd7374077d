"""lxml.html's element classes, given by lxml's own lookups instead of lxml.html's Python one.

A parser of ``lxml.html`` gives each element object its class (``HtmlElement``, ``FormElement``
for a ``<form>``, ``HtmlComment``...) by calling a lookup written in Python every time lxml makes
an object for a node; trafilatura and sift's passes make thousands a page, and each of its readings
copies the page whole, so the objects are made again. ``use_lxml_lookup`` gives a parser's
documents the same classes through lxml's compiled lookups, which cost next to nothing.

The sandbox child imports this module with ``main_content``: lxml only.
"""

from __future__ import annotations

import lxml.html
from lxml import etree

# The elements lxml.html gives a class of their own, by tag (lower-case, as its parser writes tags).
HTML_CLASSES = {
    "form": lxml.html.FormElement,
    "input": lxml.html.InputElement,
    "label": lxml.html.LabelElement,
    "select": lxml.html.SelectElement,
    "textarea": lxml.html.TextareaElement,
}


def lxml_lookup() -> etree.ElementNamespaceClassLookup:
    """The classes ``lxml.html.HtmlElementClassLookup`` gives: ``HTML_CLASSES``, ``HtmlElement``
    for any other element."""
    lookup = etree.ElementNamespaceClassLookup(
        etree.ElementDefaultClassLookup(
            element=lxml.html.HtmlElement,
            comment=lxml.html.HtmlComment,
            pi=lxml.html.HtmlProcessingInstruction,
            entity=lxml.html.HtmlEntity,
        )
    )
    lookup.get_namespace(None).update(HTML_CLASSES)
    return lookup


def use_lxml_lookup(parser: etree.HTMLParser) -> None:
    """Give ``parser``'s documents (and their copies) their classes through ``lxml_lookup``."""
    parser.set_element_class_lookup(lxml_lookup())
