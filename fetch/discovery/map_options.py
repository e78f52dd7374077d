"""What a map may ask (docs/api.md, "Map a site"): its URL and options, defined once, validated.

``MapOptions`` gives each option its type, default, limits and description; the OpenAPI
document and the MCP ``map`` tool's input schema are built from ``map_option_schemas()``.
``parse_map_request`` is the one place a map's raw URL and options are checked, for REST and MCP
alike, and refuses with ``InvalidTarget`` naming the field.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import re2
from pydantic import BaseModel, ConfigDict, Field

from fetch.options import InvalidTarget, _without_null
from fetch.targets import normalise_url, printable, re2_options

DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
MAX_PATTERN_CHARS = 1000
MAX_SEARCH_CHARS = 500


class MapOptions(BaseModel):
    """A map's options; an option left out, or sent as null, takes its default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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


@dataclass(frozen=True)
class MapRequest:
    url: str
    options: MapOptions = field(default_factory=MapOptions)


@cache
def _schemas() -> dict[str, dict[str, Any]]:
    properties = MapOptions.model_json_schema()["properties"]
    return {name: _without_null(schema) for name, schema in properties.items()}


def map_option_schemas() -> dict[str, dict[str, Any]]:
    """Each option's JSON Schema, by name, without the null that means "left out"."""
    return copy.deepcopy(_schemas())


def parse_map_request(url: object, raw_options: dict[str, Any]) -> MapRequest:
    """The URL and options of a map, checked; nulls are "left out"; patterns compiled once."""
    known = _schemas()
    unknown = sorted(printable(name) for name in set(raw_options) - set(known))
    if unknown:
        raise InvalidTarget(
            unknown[0], f"unknown option {unknown[0]!r}", "Known options: " + ", ".join(known) + "."
        )
    given = {name: value for name, value in raw_options.items() if value is not None}
    for name, value in given.items():
        _check(name, value, known[name])
    normalised = normalise_url(url)
    for name in ("include", "exclude"):
        if name in given:
            _compile(name, given[name])
    return MapRequest(normalised, MapOptions.model_construct(**{**MapOptions().model_dump(), **given}))


def _check(name: str, value: object, schema: dict[str, Any]) -> None:
    if schema["type"] == "boolean":
        if not isinstance(value, bool):
            raise InvalidTarget(name, f"{name} must be true or false", f"Send {name} as a JSON boolean.")
    elif schema["type"] == "integer":
        least, most = schema["minimum"], schema["maximum"]
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            raise InvalidTarget(
                name,
                f"{name} must be a whole number from {least} to {most}",
                f"Send {name} as a JSON integer.",
            )
    else:
        limit = schema["maxLength"]
        if not isinstance(value, str) or not value.strip():
            raise InvalidTarget(name, f"{name} must be a non-empty string", f"Send {name} as a string.")
        if len(value) > limit or "\x00" in value or value != printable(value):
            raise InvalidTarget(
                name,
                f"{name} is longer than {limit} characters or holds a NUL or a lone surrogate",
                f"Send {name} as valid text of at most {limit} characters.",
            )


def _compile(name: str, pattern: str) -> None:
    try:
        re2.compile(pattern, options=re2_options())
    except re2.error as exc:
        message = exc.args[0] if exc.args else exc
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
        raise InvalidTarget(
            name,
            f"{name} does not compile: {printable(text)}",
            "Use RE2 syntax (no backreferences or lookaround) and keep the pattern small.",
        ) from None


def compiled(pattern: str | None) -> Any:
    """A checked pattern compiled, or ``None``."""
    return None if pattern is None else re2.compile(pattern, options=re2_options())
