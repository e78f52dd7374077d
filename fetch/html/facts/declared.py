"""Everything a page declares about itself, read from the parsed page before anything of it is
dropped: ``metadata`` always, and with ``structured`` the items themselves (``structured_data``),
the product the page is about (``product``), how many blocks were malformed
(``structured_errors``) and whether the items were cut to ``MAX_STRUCTURED_BYTES``
(``structured_truncated``). None of it reaches the page's text.
"""

from __future__ import annotations

import json
from typing import Any

import lxml.html

from fetch.html.facts import meta_tags, metadata, values
from fetch.html.facts.elements import gather
from fetch.html.facts.jsonld import json_ld_items, pruned, types_of
from fetch.html.facts.microdata import markup_items
from fetch.html.facts.product import product_facts

# The most structured data one answer carries, as JSON; the items past it are left out.
MAX_STRUCTURED_BYTES = 256 << 10


def declared_facts(tree: lxml.html.HtmlElement, url: str, *, structured: bool) -> dict[str, Any]:
    """``metadata`` of the page at ``url`` (the base of its relative URLs), and with
    ``structured`` its items, product, malformed blocks and truncation."""
    page = gather(tree)
    json_ld, errors = json_ld_items(page.script)
    marked = markup_items(tree, url)
    tags = meta_tags.meta_tags(page.meta)
    in_markup = [item for _, item in marked]
    declared = metadata.merged(
        metadata.from_items(json_ld, url), metadata.from_items(in_markup, url), meta_tags.from_meta(tags, url)
    )
    wanted = set(metadata.FIELDS) - set(declared)
    facts: dict[str, Any] = {
        "metadata": metadata.merged(declared, meta_tags.from_markup(tree, page, url, wanted))
    }
    if not structured:
        return facts
    listed = [("json-ld", item) for item in json_ld] + marked
    graph = meta_tags.opengraph(tags)
    if graph:
        listed.append(("opengraph", graph))
    items, truncated = _within_budget(listed)
    facts["structured_data"] = items
    facts["structured_errors"] = errors
    facts["structured_truncated"] = truncated
    product = product_facts([json_ld, in_markup])
    if product:
        facts["product"] = product
    return facts


def _within_budget(declared: list[tuple[str, dict[str, Any]]]) -> tuple[list[dict[str, Any]], bool]:
    """Each item as ``{syntax, type, data}``, in order, until ``MAX_STRUCTURED_BYTES`` of them."""
    items: list[dict[str, Any]] = []
    used = 0
    for syntax, data in declared:
        types = types_of(data) if syntax != "opengraph" else [str(values.first(data.get("og:type")) or "")]
        item = {"syntax": syntax, "type": types[0] if types and types[0] else None, "data": pruned(data, 0)}
        used += len(json.dumps(item, ensure_ascii=False).encode("utf-8", "surrogatepass")) + 1
        if used > MAX_STRUCTURED_BYTES:
            return items, True
        items.append(item)
    return items, False
