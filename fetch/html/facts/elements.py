"""The elements of a page that declare something about it, met in one pass over the page.

``tree.iter`` with tag names walks the page in C and hands Python only the elements named, so
the ``<meta>``, ``<link>``, ``<script>``, ``<title>``, ``<h1>`` and ``<time>`` elements of a page cost one
walk, where an XPath query for each would cost one walk each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import lxml.html

# The most elements of one name kept from a page: a page of more declares nothing more.
MAX_PER_TAG = 2000
TAGS = ("meta", "link", "script", "title", "h1", "time")


@dataclass
class Elements:
    meta: list[lxml.html.HtmlElement] = field(default_factory=list)
    link: list[lxml.html.HtmlElement] = field(default_factory=list)
    script: list[lxml.html.HtmlElement] = field(default_factory=list)
    title: list[lxml.html.HtmlElement] = field(default_factory=list)
    h1: list[lxml.html.HtmlElement] = field(default_factory=list)
    time: list[lxml.html.HtmlElement] = field(default_factory=list)


def gather(tree: lxml.html.HtmlElement) -> Elements:
    """The page's elements of ``TAGS``, each name's in document order."""
    found = Elements()
    for element in tree.iter(*TAGS):
        listed: list[lxml.html.HtmlElement] = getattr(found, element.tag)
        if len(listed) < MAX_PER_TAG:
            listed.append(element)
    return found
