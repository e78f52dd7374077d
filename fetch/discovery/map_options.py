"""What a map may ask (docs/api.md, "Map a site"): its URL and options, defined once, validated.

``MapOptions`` gives each option its type, default, limits and description, and validates them
as ``TargetOptions`` does a target's; the OpenAPI document and the MCP ``map`` tool's input
schema are built from ``map_option_schemas()``. ``parse_map_request`` takes a map's raw URL and
options, for REST and MCP alike, and refuses with ``InvalidTarget`` naming the field
(``url``, ``options.limit``), in the words ``fetch.targets.refusal`` gives a target's options.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import re2
from pydantic import Field, ValidationError, field_validator

from fetch.options import InvalidTarget, OptionSet, plain_text, without_null
from fetch.targets import normalise_url, printable, re2_options, refusal

DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
MAX_PATTERN_CHARS = 1000
MAX_SEARCH_CHARS = 500


class MapOptions(OptionSet):
    """A map's options; an option left out, or sent as null, takes its default."""

    links: bool = Field(
        default=False,
        description="Also list the links of the given page itself (only that page: sift does not crawl).",
    )
    subdomains: bool = Field(
        default=False, description="Also keep URLs on subdomains of the given URL's host."
    )
    include: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PATTERN_CHARS,
        description="Keep only URLs whose path matches this regular expression (RE2, searched "
        "anywhere in the path: anchor it with ^, e.g. '^/docs/').",
    )
    exclude: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PATTERN_CHARS,
        description="Leave out URLs whose path matches this regular expression (RE2).",
    )
    search: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SEARCH_CHARS,
        description="Words to look for: keep only URLs whose path or sitemap fields hold at least "
        "one of them, those holding the most first.",
    )
    limit: int = Field(
        default=DEFAULT_LIMIT,
        ge=1,
        le=MAX_LIMIT,
        description=f"The most URLs to answer (default {DEFAULT_LIMIT}, at most {MAX_LIMIT}).",
    )
    robots: bool = Field(
        default=False,
        description="Obey robots.txt: leave out URLs it disallows for sift, and space sift's "
        "requests to the site by its Crawl-delay.",
    )

    _texts_are_plain = field_validator("include", "exclude", "search")(plain_text)


@dataclass(frozen=True)
class MapRequest:
    url: str
    options: MapOptions = field(default_factory=MapOptions)


@cache
def _schemas() -> dict[str, dict[str, Any]]:
    properties = MapOptions.model_json_schema()["properties"]
    return {name: without_null(schema) for name, schema in properties.items()}


def map_option_schemas() -> dict[str, dict[str, Any]]:
    """Each option's JSON Schema, by name, without the null that means "left out"."""
    return copy.deepcopy(_schemas())


def parse_map_request(url: object, raw_options: object) -> MapRequest:
    """The URL and options of a map, checked; nulls are "left out"; patterns compiled once the
    cheap checks have passed."""
    try:
        options = MapOptions.model_validate({} if raw_options is None else raw_options)
    except ValidationError as exc:
        raise refusal(exc, _schemas(), 'Send options as {"links": true}.') from None
    normalised = normalise_url(url)
    for name in ("include", "exclude"):
        pattern = getattr(options, name)
        if pattern is not None:
            _compile(name, pattern)
    return MapRequest(normalised, options)


def _compile(name: str, pattern: str) -> None:
    try:
        re2.compile(pattern, options=re2_options())
    except re2.error as exc:
        message = exc.args[0] if exc.args else exc
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
        raise InvalidTarget(
            f"options.{name}",
            f"{name} does not compile: {printable(text)}",
            "Use RE2 syntax (no backreferences or lookaround) and keep the pattern small.",
        ) from None


def compiled(pattern: str | None) -> Any:
    """A checked pattern compiled, or ``None``."""
    return None if pattern is None else re2.compile(pattern, options=re2_options())
