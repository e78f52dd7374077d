"""What a page that says nothing of its kind is read for: the one main element its author marked.

A page that names no schema.org or Open Graph kind (a service or pricing page, a collection,
a listing, a documentation page) is often built of many short sections: plans and prices, a
grid of items, feature blocks. trafilatura, looking for running text, drops most of them. When
the page marks its main content itself, with exactly one ``<main>`` element (or one element of
role ``main``), that element is the content: its navigation, header, footer, asides, forms,
buttons and blocks named as page furniture (breadcrumbs, share and social bars,
related links, cookie and newsletter boxes, pagination, links to the previous and next post,
comments) are left out. ``html_text``
prefers it to trafilatura's reading when it holds at least ``MAIN_KEEPS`` of that reading's
text (docs/fetch-content.md). Hidden text was dropped before, or kept on purpose
(``fetch.hidden``).

The sandbox child runs it: it imports nothing but the standard library and lxml.
"""

from __future__ import annotations

import copy
import re

import lxml.html

# The main element is preferred when its text is at least this share of trafilatura's reading
# (below it, the element is a part of the page, not its content).
MAIN_KEEPS = 0.8
# On a page that calls itself an article only by its og:type (many sites put it on every page),
# the main element is preferred when it holds at least this many times trafilatura's reading:
# there the reading, tuned for articles, dropped most of a page of another kind.
MAIN_KEEPS_ARTICLE = 2.0
_MAIN = "//main | //*[@role='main']"
_FURNITURE = ".//nav | .//header | .//footer | .//aside | .//form | .//button | .//*[@role='navigation']"
# Class or id words of page furniture inside a main element.
_FURNITURE_NAMES = re.compile(
    r"breadcrumb|share|social|related|cookie|newsletter|subscribe|signup|sign-up|skip|sidebar"
    r"|pagination|comment|promo|banner|modal|popup|visually-hidden|sr-only|screen-reader|navigation"
    r"|(?<![a-z])(?:prev|previous|next)(?![a-z])",
    re.IGNORECASE,
)


def main_element(tree: lxml.html.HtmlElement) -> lxml.html.HtmlElement | None:
    """A copy of the page's one main element without its furniture, or None when the page marks
    no main element or more than one."""
    found = tree.xpath(_MAIN)
    if len(found) != 1:
        return None
    main = copy.deepcopy(found[0])
    for element in main.xpath(_FURNITURE):
        _drop(element)
    for element in list(main.iter()):
        if not isinstance(element.tag, str):
            continue
        names = f"{element.get('class') or ''} {element.get('id') or ''}"
        if _FURNITURE_NAMES.search(names):
            _drop(element)
    return main


def _drop(element: lxml.html.HtmlElement) -> None:
    # Removing an element also removes its tail text; that text belongs to the parent, so it is
    # kept by lxml's drop_tree.
    if element.getparent() is not None:
        element.drop_tree()
