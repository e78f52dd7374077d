"""A page's metadata from every source it declares, in order of trust: JSON-LD, then microdata and
RDFa, then OpenGraph, Twitter and Dublin Core tags, then the page's own markup. Each field takes
the first source that gives it a value that reads (a date that parses, an absolute http(s) URL, a
language tag); a field no source gives is left out.

Among a syntax's items, the page's main entity says most: the item of the most telling type
(an article, a product, a recipe, an event... before a web page, before anything else), the
first of them; a web page's ``mainEntity`` stands in for it. The site's name comes from its
``WebSite`` item, else from the main entity's publisher.
"""

from __future__ import annotations

from typing import Any

from fetch.html.facts import values
from fetch.html.facts.jsonld import types_of
from fetch.html.facts.meta_tags import read_field

MAX_VALUES = 20
FIELDS = (
    "title", "description", "authors", "published", "modified", "language", "site_name",
    "canonical_url", "image", "type",
)  # fmt: skip
# Types that say what a page is about, most telling first; then pages; the rest rank last, and
# these say nothing of the page itself (a site's search box, its menu, its trail of links).
_THINGS = frozenset({
    "Article", "NewsArticle", "BlogPosting", "ReportageNewsArticle", "AnalysisNewsArticle",
    "OpinionNewsArticle", "LiveBlogPosting", "TechArticle", "ScholarlyArticle", "Report", "Review",
    "Product", "ProductGroup", "IndividualProduct", "Recipe", "Event", "VideoObject", "Course",
    "JobPosting", "Book", "Movie", "MusicRecording", "PodcastEpisode", "SoftwareApplication",
    "Dataset", "HowTo", "QAPage", "Question", "DiscussionForumPosting", "SocialMediaPosting",
    "Periodical", "CreativeWork",
})  # fmt: skip
_PAGES = frozenset({
    "WebPage", "ItemPage", "AboutPage", "CollectionPage", "ProfilePage", "ContactPage", "FAQPage",
    "SearchResultsPage", "MedicalWebPage", "RealEstateListing", "CheckoutPage",
})  # fmt: skip
_NOT_THE_PAGE = frozenset({
    "WebSite", "BreadcrumbList", "SiteNavigationElement", "WPHeader", "WPFooter", "WPSideBar",
    "SearchAction", "ImageObject", "ListItem", "EntryPoint", "ReadAction", "Organization",
    "Corporation", "NewsMediaOrganization", "Person", "Brand", "PostalAddress", "ContactPoint",
})  # fmt: skip


def main_entity(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The item the page is about: the first of the most telling type, a page's ``mainEntity``
    when that page ranks first; None when every item is about something else."""
    best, best_rank = None, 0
    for item in items:
        rank = _rank(types_of(item))
        if rank > best_rank:
            best, best_rank = item, rank
    if best is not None and best_rank == 2:
        inner = values.first(best.get("mainEntity"))
        if isinstance(inner, dict) and _rank(types_of(inner)) == 3:
            return inner
    return best


def _rank(types: list[str]) -> int:
    if any(t in _THINGS for t in types):
        return 3
    if any(t in _PAGES for t in types):
        return 2
    if types and not all(t in _NOT_THE_PAGE for t in types):
        return 1
    return 0


def from_items(items: list[dict[str, Any]], base: str) -> dict[str, Any]:
    """Each metadata field the items give: the main entity's, and the site's name. A value that
    only names another item of the page (``{"@id": "#primaryimage"}``) is read as that item."""
    main = main_entity(items)
    found: dict[str, Any] = {}
    named = {item["@id"]: item for item in items if isinstance(item.get("@id"), str)}

    def get(name: str) -> Any:
        value = main.get(name) if main is not None else None
        listed = value if isinstance(value, list) else [value]
        resolved = [_resolved(part, named) for part in listed[:MAX_VALUES]]
        return resolved if isinstance(value, list) else resolved[0]

    if main is not None:
        publisher = values.first(get("publisher"))
        candidates: dict[str, list[Any]] = {
            "title": [main.get("headline"), main.get("name")],
            "description": [main.get("description")],
            "authors": _as_list(get("author")) + _as_list(get("creator")),
            "published": [main.get("datePublished"), main.get("dateCreated"), main.get("uploadDate")],
            "modified": [main.get("dateModified")],
            "language": [main.get("inLanguage")],
            "site_name": [values.name_of(publisher)],
            "canonical_url": [main.get("url"), main.get("mainEntityOfPage")],
            "image": [get("image"), main.get("thumbnailUrl")],
            "type": types_of(main)[:1],
        }
        for field, listed in candidates.items():
            value = read_field(field, [c for c in listed if c], base)
            if value:
                found[field] = value
    site = next((item for item in items if "WebSite" in types_of(item)), None)
    site_name = values.name_of(site.get("name")) if site is not None else None
    if site_name:
        found["site_name"] = site_name
    return found


def _resolved(value: Any, named: dict[str, dict[str, Any]]) -> Any:
    if isinstance(value, dict) and set(value) == {"@id"}:
        return named.get(str(value["@id"]), value)
    return value


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def merged(*sources: dict[str, Any]) -> dict[str, Any]:
    """Each field from the first source that gives it, in the order of ``FIELDS``."""
    found: dict[str, Any] = {}
    for field in FIELDS:
        for source in sources:
            if source.get(field):
                found[field] = source[field]
                break
    return found
