"""JSON Schemas of a target, its URL and its options for the doors' published schemas (OpenAPI,
MCP's tool inputs), made from the option models of ``fetch.options``; nothing validates by them."""

from __future__ import annotations

from typing import Any

from fetch.limits import MAX_URL_CHARS
from fetch.options import option_schemas


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def options_schema() -> dict[str, Any]:
    """A target's ``options`` object as JSON Schema: null, or an object of known options, each nullable."""
    properties = {name: nullable(schema) for name, schema in option_schemas().items()}
    return nullable({"type": "object", "additionalProperties": False, "properties": properties})


def url_schema() -> dict[str, Any]:
    """A target's URL as JSON Schema: a necessary condition only (http or https, a host, no spaces
    or control characters); ``fetch.targets.normalise_url`` says the rest."""
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_URL_CHARS,
        "pattern": r"^[Hh][Tt][Tt][Pp][Ss]?://[^\x00-\x20\x7f]+$",
        "description": "An absolute http:// or https:// URL without user name or password.",
        "examples": ["https://example.org/article"],
    }


def target_schema() -> dict[str, Any]:
    """One target as JSON Schema: a URL string, or ``{"url": ..., "options": {...}}``."""
    target = {
        "type": "object",
        "additionalProperties": False,
        "required": ["url"],
        "properties": {"url": url_schema(), "options": options_schema()},
    }
    return {"anyOf": [url_schema(), target]}
