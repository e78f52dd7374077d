"""What a page that says nothing of its kind is read for: the one main element its author marked.

A page that names no schema.org or Open Graph kind (a service or pricing page, a collection,
a listing, a documentation page) is often built of many short sections: plans and prices, a
grid of items, feature blocks. trafilatura, looking for running text, drops most of them. When
the page marks its main content itself, with exactly one ``<main>`` element (or one element of
role ``main``), that element is the content: its navigation, header, footer, asides, forms,
buttons and blocks named as page furniture (breadcrumbs, share and social bars,
related links, cookie and newsletter boxes, pagination, links to the previous and next post,
comments) are left out. ``main_content``
prefers it to trafilatura's reading when it holds at least ``MAIN_KEEPS`` of that reading's
text (docs/fetch-content.md). Hidden text was dropped before, or kept on purpose
(``fetch.html.hidden``).

A cookie or consent banner, and a modal dialog outside the main element (a newsletter or
discount pop-up, a cart drawer), is no text of any page (``drop_overlays``), nor is a section of
other items than the page's own (a shop's "More like this", ``drop_related_sections``): they are
removed before the page is read, whatever its kind.

When trafilatura's reading is a scrap, ``scrap_holder`` finds the block around its lines (a grid
whose prices alone it kept).

On a page that calls itself an article by ``og:type`` alone, ``grows_inside`` says whether a
longer reading adds text of the same block as the article reading (that reading cut its own
text) or text from elsewhere on the page (``main_content``).

The sandbox child runs it: it imports nothing but the standard library and lxml.
"""

from __future__ import annotations

import copy
import re

import lxml.html
from lxml import etree

# The main element is preferred when its text is at least this share of trafilatura's reading
# (below it, the element is a part of the page, not its content).
MAIN_KEEPS = 0.8
# On a page that calls itself an article only by its og:type (many sites put it on every page),
# the main element is preferred when it holds at least this many times trafilatura's reading:
# there the reading, tuned for articles, dropped most of a page of another kind.
MAIN_KEEPS_ARTICLE = 2.0
# A link to the element itself, in its first heading (a section's permalink); links were made
# absolute before (fetch.html.markdown), so the href ends with the fragment.
_SELF_LINK = (
    "(.//h1 | .//h2 | .//h3 | .//h4 | .//h5 | .//h6)[1]"
    "//a[substring(@href, string-length(@href) - string-length($ref) + 1) = $ref]"
)
_MAIN = "//main | //*[@role='main']"
_FURNITURE = ".//nav | .//header | .//footer | .//aside | .//form | .//button | .//*[@role='navigation']"
# Class or id words of page furniture inside a main element.
_FURNITURE_NAMES = re.compile(
    r"breadcrumb|share|social|related|cookie|newsletter|subscribe|signup|sign-up|skip|sidebar"
    r"|pagination|comment|promo|banner|modal|popup|visually-hidden|sr-only|screen-reader|navigation"
    r"|(?<![a-z])(?:prev|previous|next)(?![a-z])",
    re.IGNORECASE,
)


def marks_main(tree: lxml.html.HtmlElement) -> bool:
    """Whether the page marks a main element (one or several)."""
    return bool(tree.xpath(_MAIN))


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
        names = f"{element.get('class') or ''} {_own_id(element)}"
        if _FURNITURE_NAMES.search(names):
            _drop(element)
    return main


# The heading of a section of other items than the page's own (a shop's "Related items", "More
# like this", "Customers also viewed")...
_RELATED_HEADING = re.compile(
    r"^\W*(?:related\b|more like this|you (?:may|might) also (?:like|enjoy)"
    r"|customers (?:also|frequently|who)|people (?:also|who)|frequently bought|similar (?:items|products)"
    r"|recommended (?:for you|products|items)|products related|recently viewed)",
    re.IGNORECASE,
)
# ...when its text is mostly its links (the items' names and prices): a buying guide under a
# "Related" heading is text of the page.
RELATED_LINKS = 0.5
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")


def drop_related_sections(tree: lxml.html.HtmlElement) -> None:
    """Remove each section of the page headed as other items than the page's own ("Related
    items", "More like this", "Customers also viewed"): the largest block around such an
    ``<h2>``-``<h4>`` inside the body that holds no other heading of its rank or above, when at
    least ``RELATED_LINKS`` of its text is link text."""
    body = tree.find("body")
    if body is None:
        return
    for heading in body.xpath(".//h2 | .//h3 | .//h4"):
        if not _RELATED_HEADING.search(heading.text_content().strip()):
            continue
        rank = _HEADINGS[: _HEADINGS.index(heading.tag) + 1]
        section = heading
        for up in heading.iterancestors():
            # Stops at the first other heading met: a page of many headings costs no more.
            if up is body or any(other is not heading for other in up.iter(*rank)):
                break
            section = up
        else:
            continue  # inside a section dropped before
        if _link_share(section) >= RELATED_LINKS:
            _drop(section)


def _link_share(element: lxml.html.HtmlElement) -> float:
    """The share of ``element``'s text that is the text of its links."""
    text = len(_SPACES.sub("", element.text_content()))
    links = sum(len(_SPACES.sub("", link.text_content())) for link in element.iter("a"))
    return links / max(1, text)


def _own_id(element: lxml.html.HtmlElement) -> str:
    """The element's id, unless it is the anchor of a document's section: its heading links to
    it (``<section id="respond-to-review-comments"><h2>Respond to review comments <a
    href="#respond-to-review-comments">``). Documentation tools name each section after its
    title, and a title's words say nothing of furniture."""
    name = element.get("id") or ""
    if name and element.xpath(_SELF_LINK, ref=f"#{name}"):
        return ""
    return name


def _drop(element: lxml.html.HtmlElement) -> None:
    # Removing an element also removes its tail text; that text belongs to the parent, so it is
    # kept by lxml's drop_tree.
    if element.getparent() is not None:
        element.drop_tree()


# Names (id, class, aria-label) of cookie and consent banners: the words, and the consent
# managers' own names; matched against lower-cased names (faster than a case-blind pattern).
_CONSENT_NAMES = re.compile(
    r"consent|gdpr|onetrust|didomi|cookiebot|usercentrics|truste[-_]|trustarc|qc-cmp|sp_message"
    r"|cookie[-_ ]?(?:banner|bar|notice|consent|popup|modal|dialog|law|settings|preferences|policy)"
)
# Never a banner, whatever their names say ("cookie-banner-visible" on <html>).
_NOT_BANNERS = frozenset({"html", "head", "body", "main", "article"})
# A block holding one of these is the page, whatever it is named.
_PAGE_ITSELF = ".//h1 | .//main | .//article | .//*[@role='main']"
# A modal dialog outside the main element: a pop-up over the page (a newsletter or discount
# offer, a cart drawer, a search overlay). Inside it, a dialog opens on the content (a size guide).
# Reached from their attributes, which libxml2 finds faster than it tests every element for them.
_DIALOG = (
    "//body//dialog | //body//*/@aria-modal[.='true']/.. | //body//*/@role[.='dialog' or .='alertdialog']/.."
)
_OVERLAYS = f"({_DIALOG})[not(ancestor::main or ancestor::*[@role='main'])]"
# Every name a banner can go by, as strings: libxml2 makes no object of their elements.
_NAMES = tuple(etree.XPath(f"//@{name}", smart_strings=False) for name in ("id", "class", "aria-label"))


def drop_overlays(tree: lxml.html.HtmlElement) -> None:
    """Remove what covers the page rather than being part of it, when it holds no ``<h1>``,
    main element or article: its cookie and consent banners, the blocks named so (``id``,
    ``class`` or ``aria-label``: "cookie-notice", "consent", "gdpr", a consent manager's name
    such as OneTrust or Didomi), and its modal dialogs outside the main element (``<dialog>``,
    role ``dialog`` or ``alertdialog``, ``aria-modal``). Their text (a policy, an offer) is
    often the longest run of prose on a thread or a listing, and extractors take it for the
    content."""
    found = [*tree.xpath(_OVERLAYS), *_named_banners(tree)]
    chosen = {element for element in found if not element.xpath(_PAGE_ITSELF)}
    for element in chosen:
        if not any(up in chosen for up in element.iterancestors()):
            _drop(element)


def _named_banners(tree: lxml.html.HtmlElement) -> list[lxml.html.HtmlElement]:
    """The elements whose ``id``, ``class`` or ``aria-label`` names a banner (``_CONSENT_NAMES``).

    Most pages name none: all their names are searched at once first (joined by a line end, which
    no banner's name spans), and only a page that names one is walked in Python, each name
    read and tested on its own (faster than an XPath testing every element's names for each word).
    """
    names = "\n".join("\n".join(path(tree)) for path in _NAMES)
    if not _CONSENT_NAMES.search(names.lower()):
        return []
    found: list[lxml.html.HtmlElement] = []
    for element in tree.iter(etree.Element):
        if element.tag in _NOT_BANNERS:
            continue
        for name in (element.get("id"), element.get("class"), element.get("aria-label")):
            if name and _CONSENT_NAMES.search(name.lower()):
                found.append(element)
                break
    return found


# An article by og:type alone is read by the fast, article-tuned readings; trafilatura's balanced
# reading (with its fallbacks) replaces them when it holds at least this many times their text...
BALANCED_MORE = 1.25
# ...and at least this share of the text it adds lies inside the block that holds the fast
# reading: the fast reading cut into its own text (a service page's sections), rather than the
# balanced reading adding other parts of the page (related items, a listing's teasers).
BALANCED_INSIDE = 0.5
# Elements holding a page's frame: a block holding one of them is the page, not one text in it.
_FRAME = ".//header | .//footer | .//main | .//*[@role='main']"
_OWN_TEXT = "//body//*[text()[normalize-space()]]"
_SPACES = re.compile(r"\s+")


def grows_inside(tree: lxml.html.HtmlElement, reading: str, longer: str) -> bool:
    """Whether ``longer`` adds to ``reading`` mostly text of the same block: the lines it adds lie,
    for at least ``BALANCED_INSIDE`` of their characters, inside the nearest element holding every
    line of ``reading`` found in the page, an element that is not the page's frame (the body, or
    a block holding its header, footer or main element)."""
    blocks = _blocks_by_text(tree)
    have = {_line(text) for text in reading.split("\n")}
    holder = _common_ancestor([blocks[text] for text in have if text in blocks])
    if holder is None or holder.tag in ("html", "body") or holder.xpath(_FRAME):
        return False
    added = [text for text in map(_line, longer.split("\n")) if text and text not in have]
    inside = sum(len(text) for text in added if text in blocks and _within(blocks[text], holder))
    return inside >= BALANCED_INSIDE * max(1, sum(map(len, added)))


def _line(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def _blocks_by_text(tree: lxml.html.HtmlElement) -> dict[str, lxml.html.HtmlElement]:
    """Each element with text of its own, by its whole text (the first one met of a text)."""
    found: dict[str, lxml.html.HtmlElement] = {}
    for element in tree.xpath(_OWN_TEXT):
        found.setdefault(_line(element.text_content()), element)
    return found


def _common_ancestor(elements: list[lxml.html.HtmlElement]) -> lxml.html.HtmlElement | None:
    if not elements:
        return None
    chains = [[element, *element.iterancestors()][::-1] for element in elements]
    common = None
    for level in zip(*chains, strict=False):
        if any(element is not level[0] for element in level):
            break
        common = level[0]
    return common


def _within(element: lxml.html.HtmlElement, holder: lxml.html.HtmlElement) -> bool:
    return element is holder or any(up is holder for up in element.iterancestors())


def scrap_holder(tree: lxml.html.HtmlElement, reading: str) -> lxml.html.HtmlElement | None:
    """The nearest element holding every element whose whole text is a line of ``reading`` (each
    of them, where a line is met more than once: the prices of a grid), when it is not the
    page's frame (the body, or a block holding its header, footer or main element)."""
    lines = {_line(text) for text in reading.split("\n")} - {""}
    found = [element for element in tree.xpath(_OWN_TEXT) if _line(element.text_content()) in lines]
    holder = _common_ancestor(found)
    if holder is None or holder.tag in ("html", "body") or holder.xpath(_FRAME):
        return None
    return holder


# Page furniture: a page whose words all lie in these is a frame with nothing in it.
_FURNITURE_BLOCKS = (
    "ancestor::nav or ancestor::header or ancestor::footer or ancestor::aside"
    " or ancestor::*[@role='navigation' or @role='banner' or @role='contentinfo']"
)
_UNSEEN = "ancestor::script or ancestor::style or ancestor::noscript or ancestor::template"
_BODY_TEXTS = etree.XPath(f"//body//text()[not({_UNSEEN})]", smart_strings=False)
_OUTSIDE_FURNITURE = etree.XPath(
    f"//body//text()[not({_UNSEEN}) and not({_FURNITURE_BLOCKS})]", smart_strings=False
)
_LINK_TEXTS = etree.XPath(f"//body//a//text()[not({_UNSEEN})]", smart_strings=False)
# A page of navigation alone has at least this share of its words in links. On the labelled pages
# (bench/train.py prints the check) every page whose words all lie in navigation, header, footer
# or aside blocks, 16 of 1,181, holds content there, and at most half of its words are links.
NAVIGATION_LINKS = 0.75
_WORD = re.compile(r"\w+")


def navigation_only(tree: lxml.html.HtmlElement) -> bool:
    """Whether the page holds nothing but its frame: no word outside its navigation, header,
    footer and aside blocks, and its words mostly links (a menu, a "Home" link). A page of links
    in its body (a listing, an index) has words outside those blocks, and is content."""
    if any(_WORD.search(text) for text in _OUTSIDE_FURNITURE(tree)):
        return False
    words = sum(len(_WORD.findall(text)) for text in _BODY_TEXTS(tree))
    links = sum(len(_WORD.findall(text)) for text in _LINK_TEXTS(tree))
    return words > 0 and links >= NAVIGATION_LINKS * words
