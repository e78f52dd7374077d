"""What a page says it is: the schema.org types it names (JSON-LD, microdata) and its Open Graph
``og:type``, read as one of the kinds ``main_content`` reads alike (forum, product, documentation,
listing, article, or a page that says none of these; docs/fetch-content.md).

The sandbox child runs it: it imports nothing but the standard library and lxml. The page-type
model (``fetch.html.page_type``) is not on that path: the service reads a page by what it says.
"""

from __future__ import annotations

import re

import lxml.html

# schema.org types that say what a page is, most specific kind first (declared_kind).
_KIND_TYPES = (
    ("forum", frozenset({"DiscussionForumPosting", "QAPage", "SocialMediaPosting", "Comment"})),
    ("product", frozenset({"Product", "ProductGroup", "IndividualProduct", "Offer"})),
    ("documentation", frozenset({"TechArticle", "APIReference", "SoftwareSourceCode"})),
    ("listing", frozenset({"ItemList", "CollectionPage", "SearchResultsPage", "OfferCatalog"})),
    ("article", frozenset({"Article", "NewsArticle", "BlogPosting", "ReportageNewsArticle",
                           "AnalysisNewsArticle", "OpinionNewsArticle", "Report", "LiveBlogPosting"})),
)  # fmt: skip
ARTICLE_TYPES = dict(_KIND_TYPES)["article"]
_LD_TYPE = re.compile(r'"@type"\s*:\s*(\[[^\]]{0,300}\]|"[^"]{0,200}")')
_QUOTED = re.compile(r'"([^"]+)"')
OG_TYPE = "//meta[@property='og:type']/@content"


def page_kind(tree: lxml.html.HtmlElement) -> str:
    """What the page says it is: forum, product, documentation, listing, article or page."""
    return declared_kind(tree, schema_types(tree))


def declared_kind(tree: lxml.html.HtmlElement, types: set[str]) -> str:
    """What the page says it is, by its schema.org ``types`` and its Open Graph ``og:type``.

    The most specific first: a thread's posts, a product, a technical document, a list of items,
    then an article (``og:type`` article, which many sites put on every page, counts only when
    nothing more specific is said). A page that says none of these is a "page".
    """
    og_type = next((str(value).strip().lower() for value in tree.xpath(OG_TYPE)), "")
    for kind, names in _KIND_TYPES:
        if types & names:
            return kind
        if kind == "product" and og_type.startswith("product"):
            return kind
    return "article" if og_type == "article" else "page"


def schema_types(tree: lxml.html.HtmlElement) -> set[str]:
    """Every schema.org type the page names, in JSON-LD or microdata, without its URL prefix."""
    types: set[str] = set()
    for script in tree.xpath("//script[@type='application/ld+json']/text()"):
        for value in _LD_TYPE.findall(str(script)):
            types.update(_QUOTED.findall(value))
    types.update(str(url).rstrip("/").rsplit("/", 1)[-1] for url in tree.xpath("//@itemtype"))
    return types
