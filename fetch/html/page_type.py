"""What kind of page this is, as WCXB names the kinds: article, collection, documentation, forum,
listing, product or service, told by a model learnt from labelled pages (``bench/train.py``).

``page_features`` measures a parsed page in one walk: what it says of itself (schema.org types,
``og:type``), its URL's words, how much of its text is links, how many paragraphs, list items,
code blocks, tables, forms, buttons, prices, dates and headings it holds, the words of its
``class`` and ``id`` names (``post``, ``reply``, ``price``, ``sidebar``, ``toc``, ``filter``...),
and its longest run of siblings built alike (a thread's posts, a grid's cards). ``page_type``
gives them to the boosted trees of ``models/page_type.json`` (``fetch.html.forest``), read once,
when first needed. The service does not use it: ``main_content`` reads a page by the kind it
declares (``fetch.html.declared_kind``), since routing pages by the model's kind measured no better
on sites it never saw (docs/decisions.md), so the sandbox child never imports this module;
``bench/quality.py`` and ``bench/train.py`` do. It imports nothing but the standard library and
lxml.
"""

from __future__ import annotations

import math
import re
from functools import cache
from urllib.parse import urlsplit

import lxml.html
from lxml import etree

from fetch.html import forest
from fetch.html.declared_kind import OG_TYPE, schema_types

PAGE_TYPES = ("article", "collection", "documentation", "forum", "listing", "product", "service")
# schema.org types (JSON-LD @type, microdata itemtype) by the kind of page they tell.
SCHEMA_GROUPS = {
    "forum": ("DiscussionForumPosting", "QAPage", "SocialMediaPosting", "Comment", "Question", "Answer"),
    "product": ("Product", "ProductGroup", "IndividualProduct", "Offer", "AggregateOffer"),
    "documentation": ("TechArticle", "APIReference", "SoftwareSourceCode", "HowTo"),
    "listing": ("ItemList", "CollectionPage", "SearchResultsPage", "OfferCatalog", "ListItem"),
    "article": ("Article", "NewsArticle", "BlogPosting", "ReportageNewsArticle", "OpinionNewsArticle",
                "AnalysisNewsArticle", "Report", "LiveBlogPosting"),
    "service": ("Service", "LocalBusiness", "Organization", "ProfessionalService", "FAQPage"),
    "person": ("Person",),
    "breadcrumb": ("BreadcrumbList",),
}  # fmt: skip
OG_TYPES = ("article", "product", "website", "profile", "blog")
# Words of a URL's path that tell its kind (each a feature: the path holds it).
URL_WORDS = (
    "forum", "forums", "thread", "threads", "topic", "topics", "t", "community", "discussion",
    "questions", "question", "answers", "product", "products", "p", "item", "shop", "store", "buy",
    "docs", "doc", "documentation", "api", "reference", "guide", "guides", "manual", "learn", "wiki",
    "help", "support", "kb", "blog", "news", "article", "articles", "post", "posts", "story",
    "category", "categories", "collection", "collections", "c", "tag", "tags", "search", "list",
    "archive", "browse", "services", "service", "solutions", "pricing", "about", "contact",
    "features", "en", "html", "php", "index",
)  # fmt: skip
# Words of class and id names: each feature counts the elements whose names hold it.
NAME_WORDS = (
    "post", "posts", "comment", "reply", "replies", "thread", "topic", "forum", "message", "quote",
    "user", "author", "avatar", "vote", "answer", "question", "price", "cart", "product", "sku",
    "stock", "rating", "review", "variant", "quantity", "buy", "sidebar", "toc", "docs", "doc",
    "api", "code", "highlight", "syntax", "breadcrumb", "filter", "facet", "sort", "pagination",
    "pager", "card", "grid", "tile", "item", "list", "result", "collection", "catalog", "teaser",
    "article", "entry", "byline", "date", "meta", "share", "related", "tag", "hero", "cta",
    "service", "feature", "pricing", "plan", "testimonial", "faq", "accordion", "contact", "team",
    "menu", "nav", "footer", "header", "banner", "content", "main", "body", "text", "title",
)  # fmt: skip
_COUNTED_TAGS = (
    "p", "li", "pre", "code", "table", "tr", "form", "input", "select", "button", "img", "h1", "h2",
    "h3", "h4", "article", "section", "time", "nav", "aside", "main", "header", "footer", "blockquote",
    "dl", "figure", "iframe", "video", "svg", "a", "ul", "ol", "label", "textarea", "address", "strong",
)  # fmt: skip
_WORD = re.compile(r"[a-z]+")
# Phrases of a page's lower-cased text that tell its kind, counted by plain search (a regular
# expression over a long page's text costs many times more).
_TEXT_WORDS = {
    "prices": ("$", "€", "£", "¥", "₹", "usd", "eur"),
    "dates": (" 2019", " 2020", " 2021", " 2022", " 2023", " 2024", " 2025", " 2026", " ago"),
    "reply": ("reply", "replies", "quote"),
    "posted": ("posted", "joined", "member", "posts:"),
    "cart": ("add to cart", "add to basket", "add to bag", "in stock", "out of stock", "shipping"),
    "results": ("results", "showing", "sort by", "filter"),
    "contact": ("contact us", "get in touch", "book a", "request a", "free quote", "call us"),
    "api": ("parameter", "return", "function", "install", "example"),
    "read_more": ("read more", "continue reading", "view all", "see all"),
}
FEATURES: tuple[str, ...] = (
    *(f"schema_{group}" for group in SCHEMA_GROUPS),
    *(f"og_{name}" for name in OG_TYPES),
    "url_depth", "url_query", "url_year", "url_digits", "url_slash_end",
    *(f"url_{word}" for word in URL_WORDS),
    "log_elements", "log_text", "link_share", "words_per_paragraph",
    *(f"tag_{tag}" for tag in _COUNTED_TAGS),
    *(f"name_{word}" for word in NAME_WORDS),
    *(f"text_{name}" for name in _TEXT_WORDS),
    "run_length", "run_text", "run_share", "run_links",
)  # fmt: skip


def page_features(tree: lxml.html.HtmlElement, url: str, types: set[str] | None = None) -> list[float]:
    """The page's measures, in the order of ``FEATURES`` (``types``: its ``schema_types``)."""
    values: dict[str, float] = {}
    values.update(_schema(tree, schema_types(tree) if types is None else types))
    values.update(_url(url))
    values.update(_body(tree))
    return [float(values.get(name, 0.0)) for name in FEATURES]


def page_type(tree: lxml.html.HtmlElement, url: str, types: set[str] | None = None) -> tuple[str, float]:
    """The page's most likely kind and the model's share for it."""
    shares = _model().shares(page_features(tree, url, types))
    kind = max(shares, key=shares.__getitem__)
    return kind, shares[kind]


_chosen: list[forest.Forest] = []


def use_model(model: forest.Forest | None) -> None:
    """Read pages with ``model`` instead of the committed one (None: the committed one again):
    the cross-validation of ``bench/quality.py`` reads each page with a model that never saw its
    site."""
    _chosen[:] = [model] if model is not None else []


def _model() -> forest.Forest:
    return _chosen[0] if _chosen else _committed()


@cache
def _committed() -> forest.Forest:
    return forest.load("page_type")


def _schema(tree: lxml.html.HtmlElement, types: set[str]) -> dict[str, float]:
    found = {
        f"schema_{group}": float(bool(types.intersection(names))) for group, names in SCHEMA_GROUPS.items()
    }
    og = " ".join(str(value) for value in tree.xpath(OG_TYPE)).lower()
    found.update({f"og_{name}": float(name in og) for name in OG_TYPES})
    return found


def _url(url: str) -> dict[str, float]:
    parts = urlsplit(url)
    segments = [segment for segment in parts.path.lower().split("/") if segment]
    words = {word for segment in segments for word in _WORD.findall(segment)}
    words.update(segments)
    found = {f"url_{word}": float(word in words) for word in URL_WORDS}
    found.update(
        url_depth=float(len(segments)),
        url_query=float(bool(parts.query)),
        url_year=float(bool(re.search(r"/(?:19|20)\d\d/", parts.path))),
        url_digits=float(sum(ch.isdigit() for ch in parts.path)),
        url_slash_end=float(parts.path.endswith("/")),
    )
    return found


_NAMES = etree.XPath("//body//@class | //body//@id", smart_strings=False)


def _body(tree: lxml.html.HtmlElement) -> dict[str, float]:
    body = tree.find("body")
    if body is None:
        body = tree
    counts = dict.fromkeys(_COUNTED_TAGS, 0)
    elements = 0
    for element in body.iter(etree.Element):
        elements += 1
        if element.tag in counts:
            counts[element.tag] += 1
    names = dict.fromkeys(NAME_WORDS, 0)
    for word in _WORD.findall(" ".join(_NAMES(tree)).lower()):
        if word in names:
            names[word] += 1
    text = " ".join(body.text_content().split())
    lowered = text.lower()
    chars = len(text) - text.count(" ")
    link_chars = sum(len("".join(link.text_content().split())) for link in body.iter("a"))
    found: dict[str, float] = {f"tag_{tag}": math.log1p(count) for tag, count in counts.items()}
    found.update({f"name_{word}": math.log1p(count) for word, count in names.items()})
    found.update(
        log_elements=math.log1p(elements),
        log_text=math.log1p(chars),
        link_share=link_chars / max(1, chars),
        words_per_paragraph=(text.count(" ") + 1) / max(1, counts["p"]),
    )
    for name, phrases in _TEXT_WORDS.items():
        found[f"text_{name}"] = math.log1p(sum(lowered.count(phrase) for phrase in phrases))
    found.update(_longest_run(body, chars))
    return found


def _longest_run(body: lxml.html.HtmlElement, chars: int) -> dict[str, float]:
    """The largest run of siblings alike in tag and first class (by their text): its length, its
    items' mean text, its share of the page's text and of links in it."""
    best: tuple[int, list[lxml.html.HtmlElement]] = (0, [])
    for parent in body.iter(etree.Element):
        groups: dict[tuple[str, str], list[lxml.html.HtmlElement]] = {}
        for child in parent:
            if isinstance(child.tag, str) and child.tag not in ("script", "style", "option", "br"):
                first = (child.get("class") or "").split()
                groups.setdefault((child.tag, first[0] if first else ""), []).append(child)
        for items in groups.values():
            if len(items) >= 3:
                size = sum(len("".join(item.text_content().split())) for item in items)
                if size > best[0]:
                    best = (size, items)
    size, items = best
    if not items:
        return {}
    links = sum(len("".join(link.text_content().split())) for item in items for link in item.iter("a"))
    return {
        "run_length": math.log1p(len(items)),
        "run_text": math.log1p(size / len(items)),
        "run_share": size / max(1, chars),
        "run_links": links / max(1, size),
    }
