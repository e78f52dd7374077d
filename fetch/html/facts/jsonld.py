"""The JSON-LD items a page declares in its ``<script type="application/ld+json">`` blocks, read
with the standard library's JSON parser.

Each block is one JSON document: an item, a list of items, or an object whose ``@graph`` holds
them (flattened here, each item standing alone). A block that does not parse (broken JSON,
nesting deeper than the parser goes) is skipped and counted, and so is every block past
``MAX_JSON_LD_CHARS`` of JSON-LD in all: a page cannot make the child parse megabytes of it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import lxml.html

from fetch.html.facts.values import short_type

# The most JSON-LD text read from one page, and the most items kept from it; past either, the
# blocks are counted as skipped (or the items left out).
MAX_JSON_LD_CHARS = 1 << 20
MAX_ITEMS = 500
# Nesting kept in an item (deeper values are cut), so that no reader, here or in the process that
# receives the answer, recurses without bound.
MAX_DEPTH = 24
MAX_LIST_ITEMS = 200
# What pages wrap their JSON in: an HTML comment, a CDATA section, a trailing semicolon.
_WRAPPING = re.compile(r"^\s*(?:<!--|//\s*<!\[CDATA\[|<!\[CDATA\[)|(?:-->|//\s*\]\]>|\]\]>|;)\s*$")


def json_ld_items(scripts: list[lxml.html.HtmlElement]) -> tuple[list[dict[str, Any]], int]:
    """Every item of the JSON-LD blocks among a page's ``scripts``, in order (``@graph``
    flattened), and how many blocks were skipped as malformed or past the budget."""
    items: list[dict[str, Any]] = []
    skipped = 0
    read = 0
    for script in scripts:
        if "ld+json" not in (script.get("type") or "").lower():
            continue
        raw = script.text or ""
        read += len(raw)
        if read > MAX_JSON_LD_CHARS or len(items) >= MAX_ITEMS:
            skipped += 1
            continue
        try:
            document = json.loads(_WRAPPING.sub("", raw), strict=False, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            skipped += 1
            continue
        for item in _flattened(document):
            if len(items) < MAX_ITEMS:
                items.append(pruned(item, 0))
    return items, skipped


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity, which no JSON answer can carry


def _flattened(document: Any, depth: int = 0) -> list[dict[str, Any]]:
    """The items of one block: an item, a list's items, an ``@graph``'s items (and the object
    holding the graph when it is an item itself)."""
    if isinstance(document, list):
        if depth > 2:
            return []
        return [item for part in document[:MAX_ITEMS] for item in _flattened(part, depth + 1)]
    if not isinstance(document, dict):
        return []
    graph = document.get("@graph")
    found: list[dict[str, Any]] = []
    if "@type" in document:
        found.append({k: v for k, v in document.items() if k != "@graph"})
    if isinstance(graph, list | dict):
        members = graph if isinstance(graph, list) else [graph]
        found.extend(item for item in members[:MAX_ITEMS] if isinstance(item, dict))
    return found


def pruned(value: Any, depth: int) -> Any:
    """``value`` with nesting past ``MAX_DEPTH`` cut and lists past ``MAX_LIST_ITEMS`` shortened."""
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return None
        return {str(k): pruned(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        if depth >= MAX_DEPTH:
            return None
        return [pruned(v, depth + 1) for v in value[:MAX_LIST_ITEMS]]
    return value


def types_of(item: dict[str, Any]) -> list[str]:
    """An item's schema.org types, without the vocabulary's prefix."""
    declared = item.get("@type")
    values = declared if isinstance(declared, list) else [declared]
    return [short_type(value) for value in values if isinstance(value, str) and value]
