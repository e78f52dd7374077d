"""The fetch envelope and its parts (docs/api.md, "One URL now"): what ``GET``/``POST
/v1/fetch``, ``POST /v1/read`` and MCP's ``fetch`` and ``read`` answer, also the OpenAPI schema."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema
from pydantic import Field as PydanticField

from fetch.cache import CacheState


class SpanOut(Schema):
    """Where a grep match or a question passage lies in the whole text (offsets in characters)."""

    start: int
    end: int
    page: int | None = Field(None, description="The PDF page (slide, sheet, chapter) it starts on.")


class FeedEntry(Schema):
    title: str
    link: str
    date: str = Field(
        ..., description="ISO 8601 where the feed's date could be read; as the feed says otherwise."
    )
    summary: str


class RenderCutOut(Schema):
    """What a render's subrequest bounds refused (docs/rendering.md, "Subrequests")."""

    reasons: list[Literal["subrequests", "bytes"]] = Field(
        ...,
        description="subrequests: the page asked more than a render may fetch "
        "(SIFT_RENDER_SUBREQUESTS); bytes: their bodies outgrew SIFT_RENDER_SUBREQUEST_BYTES.",
    )
    refused: int = Field(..., description="The page's requests refused in the browser by those bounds.")


class ScreenshotOut(Schema):
    """A picture of the rendered page (docs/rendering.md, "Screenshots")."""

    kind: Literal["viewport", "full"]
    type: Literal["image/png", "image/jpeg"]
    width: int
    height: int = Field(..., description="In CSS pixels; a full page is cut at 16,384.")
    data: str = Field(..., description="The image, base64.")


def _absent_when_none(value: Any) -> bool:
    return value is None


class MetadataOut(Schema):
    """What an HTML page declares about itself; a field no source gives is absent. Sources in order
    of trust: JSON-LD, microdata and RDFa, OpenGraph, Twitter and Dublin Core tags, the markup."""

    title: str | None = PydanticField(None, exclude_if=_absent_when_none)
    description: str | None = PydanticField(None, exclude_if=_absent_when_none)
    authors: list[str] | None = PydanticField(None, exclude_if=_absent_when_none)
    published: str | None = PydanticField(
        None, exclude_if=_absent_when_none, description="ISO 8601: a date, or a date and time."
    )
    modified: str | None = PydanticField(None, exclude_if=_absent_when_none, description="ISO 8601.")
    language: str | None = PydanticField(None, exclude_if=_absent_when_none, description="A BCP 47 tag.")
    site_name: str | None = PydanticField(None, exclude_if=_absent_when_none)
    canonical_url: str | None = PydanticField(None, exclude_if=_absent_when_none)
    image: str | None = PydanticField(
        None, exclude_if=_absent_when_none, description="An absolute http(s) URL."
    )
    type: str | None = PydanticField(
        None, exclude_if=_absent_when_none, description="The main schema.org @type, else og:type."
    )


class StructuredItemOut(Schema):
    syntax: str = Field(..., description="json-ld, microdata, rdfa or opengraph.")
    type: str | None = Field(..., description="The item's (first) type, without its vocabulary.")
    data: dict[str, Any] = Field(..., description="The item as the page declares it (JSON-LD-like).")


class ProductOut(Schema):
    """The product a page is about, as its structured data says; a fact it does not state is absent."""

    name: str | None = PydanticField(None, exclude_if=_absent_when_none)
    brand: str | None = PydanticField(None, exclude_if=_absent_when_none)
    sku: str | None = PydanticField(None, exclude_if=_absent_when_none)
    price: int | float | None = PydanticField(None, exclude_if=_absent_when_none)
    currency: str | None = PydanticField(None, exclude_if=_absent_when_none, description="ISO 4217.")
    availability: str | None = PydanticField(
        None, exclude_if=_absent_when_none, description="schema.org's word: InStock, OutOfStock..."
    )
    rating: int | float | None = PydanticField(None, exclude_if=_absent_when_none)
    review_count: int | None = PydanticField(None, exclude_if=_absent_when_none)


class TableOut(Schema):
    caption: str | None
    headers: list[str] = Field(..., description="The header row; empty when the table has none.")
    rows: list[list[str]] = Field(..., description="Every row as long as the widest, spans repeated.")
    start: int = Field(..., description="The table's character offset in the whole text.")


class ChangeOut(Schema):
    """With changes: this reading against your last reading of the same URL and reading options."""

    status: str = Field(
        ...,
        description="new (no earlier reading of yours to compare with), same, or changed.",
    )
    previous_at: datetime | None = Field(..., description="When the reading compared with was made.")
    diff: str | None = Field(
        ...,
        description="changed: a unified diff of the whole text's lines (not the slice), cut at a line "
        "end to at most max_chars; same: empty; new: null.",
    )
    added: int = Field(..., description="Lines added, over the whole diff.")
    removed: int = Field(..., description="Lines removed, over the whole diff.")
    diff_truncated: bool = Field(..., description="true when the diff was cut to fit.")


class FetchEnvelope(Schema):
    """The answer of ``/v1/fetch``; a batch result's ``meta`` is this without ``content``."""

    url: str
    final_url: str
    status: int
    content_type: str
    title: str | None
    mode: str
    content: str
    chars: int
    bytes: int
    fetched_at: str
    elapsed_ms: int
    cache: CacheState = Field(
        ...,
        description="Where the answer came from: miss (downloaded now), hit (a cached copy young "
        "enough), revalidated (a cached copy the site said is unchanged, with a 304), stale (the "
        "last copy, answered with recover after the site failed).",
    )
    age: int = Field(..., description="The copy's age in seconds: 0 for a miss or a revalidated copy.")
    cached: bool = Field(..., description="cache is not miss.")
    stale: bool = Field(..., description="cache is stale.")
    cached_at: str | None = Field(None, description="When the copy was fetched; null for a miss.")
    lang: str | None = None
    canonical_url: str | None = None
    rendered: bool | None = Field(
        None,
        description='true when a browser rendered the page (render true, or "auto" on a page built '
        "by scripts).",
    )
    render_cut: RenderCutOut | None = Field(
        None,
        description="Present when the render was cut: the page asked more of the network than a "
        "render may (its other requests were refused, and it was read as it then was); the text "
        "may lack what those requests would have brought. A cut render is not cached.",
    )
    consent_handled: Literal["rejected", "accepted", "removed"] | None = Field(
        None,
        description="A rendered page: what was done to its cookie-consent banner or wall (rejected, "
        "accepted only when consent accept asked it, removed when it offered no reject or was no "
        "known platform's); null when there was none, or with consent leave.",
    )
    screenshot: ScreenshotOut | None = PydanticField(
        None,
        exclude_if=lambda picture: picture is None,
        description="With screenshot: the rendered page's picture; absent otherwise.",
    )
    hidden_chars: int | None = Field(
        None,
        description="An HTML page read for its text: the characters of text left out because a "
        "reader of the page cannot see them (0 with hidden keep, or when hidden_kept).",
    )
    hidden_kept: bool | None = Field(
        None,
        description="true when the page's only text is hidden (it shows it by script): it is "
        "answered all the same, rather than empty.",
    )
    pages_total: int | None = Field(
        None, description="A paged document: how many pages (PDF), slides, sheets or chapters it has."
    )
    pages: list[int] | None = Field(None, description="The pages, slides, sheets or chapters answered.")
    name: str | None = Field(None, description="An upload: the file's name, as sent.")
    entries: list[FeedEntry] | None = Field(
        None,
        description="A feed (RSS, Atom): its entries in order, as the content lists them (at most 200, "
        "each summary cut at 1,000 characters).",
    )
    matches: int | None = None
    passages: list[dict[str, Any]] | None = None
    total_chars: int = Field(
        ..., description="The length of the whole answer; content is the slice of it that starts here."
    )
    content_sha256: str = Field(
        ...,
        description="The SHA-256 of the document's whole text in this mode, before grep, question "
        "and slicing: its version, which offsets and cursors refer to.",
    )
    next_cursor: str | None = PydanticField(
        None,
        exclude_if=lambda cursor: cursor is None,
        description="Send it as cursor to read the next slice; absent on the last slice.",
    )
    spans: list[SpanOut] | None = Field(
        None,
        description="With grep or question: each match and kept passage this slice shows, in order, "
        "as character offsets into the whole text (fetch with offset and version to read from one).",
    )
    metadata: MetadataOut | None = PydanticField(
        None,
        exclude_if=_absent_when_none,
        description="An HTML page read in markdown or text mode: what it declares about itself.",
    )
    structured_data: list[StructuredItemOut] | None = PydanticField(
        None, exclude_if=_absent_when_none, description="With structured: every item the page declares."
    )
    structured_errors: int | None = PydanticField(
        None,
        exclude_if=_absent_when_none,
        description="With structured: JSON-LD blocks skipped as malformed.",
    )
    structured_truncated: bool | None = PydanticField(
        None,
        exclude_if=_absent_when_none,
        description="With structured: true when items were left out past 256 KB of them.",
    )
    product: ProductOut | None = PydanticField(
        None, exclude_if=_absent_when_none, description="With structured, on a page about one product."
    )
    tables: list[TableOut] | None = PydanticField(
        None,
        exclude_if=_absent_when_none,
        description="With tables: the data tables of the main content that start in this slice.",
    )
    change: ChangeOut | None = PydanticField(
        None,
        exclude_if=lambda change: change is None,
        description="With changes: true, how this reading differs from your last one; absent otherwise.",
    )
