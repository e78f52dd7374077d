"""Request and response shapes of ``/v1/map`` (docs/api.md, "Map a site"), also the OpenAPI
schema and the MCP ``map`` tool's output schema. The options come from ``fetch.discovery.map_options``,
their one definition and validator; requests are checked at run time by
``fetch.discovery.map_options.parse_map_request``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import ConfigDict, WithJsonSchema, create_model
from pydantic import Field as PydanticField

from doors.option_schemas import nullable, url_schema
from fetch.discovery.map_options import map_option_schemas

MapReason = Literal[
    "limit", "file_cap", "files", "bytes", "deadline", "loop", "nesting", "unreadable", "url_cap"
]


def map_options_schema() -> dict[str, Any]:
    """A map's ``options`` object as JSON Schema: null, or an object of known options, each nullable."""
    properties = {name: nullable(schema) for name, schema in map_option_schemas().items()}
    return nullable({"type": "object", "additionalProperties": False, "properties": properties})


class MapIn(Schema):
    """The body of POST /v1/map: the URL of a site, a page or a sitemap, and the map's options."""

    model_config = ConfigDict(extra="forbid")

    url: Annotated[Any, WithJsonSchema(url_schema())]
    options: Annotated[Any, WithJsonSchema(map_options_schema())] = None


def _query_parameter(schema: dict[str, Any]) -> Any:
    kind = {"boolean": bool, "integer": int}.get(schema["type"], str)
    return (Annotated[kind | None, WithJsonSchema(schema)], None)


_MapQueryFields: type[Schema] = create_model(
    "MapQuery",
    __base__=Schema,
    url=(Annotated[str, WithJsonSchema(url_schema())], ...),
    **{name: _query_parameter(schema) for name, schema in map_option_schemas().items()},
)


class MapQuery(_MapQueryFields):  # type: ignore[misc,valid-type]
    """``GET /v1/map``: the URL and the map's options as query parameters."""


class MapUrl(Schema):
    url: str = Field(..., description="Absolute and normalised: lower-case scheme and host, no fragment.")
    lastmod: str | None = PydanticField(
        None,
        exclude_if=lambda lastmod: lastmod is None,
        description="When the page last changed, as its sitemap says (W3C datetime); absent when none does.",
    )


class MapSource(Schema):
    url: str
    kind: str = Field(
        ...,
        description="urlset, sitemapindex or text (a sitemap file), sitemap (one left unread), page (links).",
    )
    urls: int = Field(
        ..., description="URLs this file added to the map (for an index: the sitemaps it lists)."
    )
    error: str | None = PydanticField(
        None, exclude_if=lambda error: error is None, description="Why the file was not read, or not whole."
    )


class MapAnswer(Schema):
    """The answer of ``/v1/map`` and of MCP's ``map``."""

    url: str
    urls: list[MapUrl] = Field(..., description="In the order found; with search, best first.")
    count: int
    truncated: bool = Field(..., description="More URLs existed than urls holds; truncated_reasons says why.")
    truncated_reasons: list[MapReason] = Field(
        ...,
        description="limit (more URLs than limit), file_cap (a file over a size cap or 50,000 URLs), "
        "files (more than 50 files), bytes (the map's byte budget), deadline (SIFT_MAP_TIMEOUT), "
        "loop (a sitemap index listing itself or an index above it), nesting (indexes deeper than 3 "
        "levels), unreadable (a named sitemap that could not be read), url_cap (more candidates "
        "than a map ranks).",
    )
    sources: list[MapSource] = Field(..., description="Every file read, in order.")
    elapsed_ms: int
    hint: str | None = PydanticField(
        None, exclude_if=lambda hint: hint is None, description="What to do next, when nothing was found."
    )
