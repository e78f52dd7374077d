"""What a target may ask beyond its URL: the one definition of every option (docs/api.md).

``TargetOptions`` gives each option its type, default, limits and description, and is the one
validator of a target's options on every door: strict types (a JSON ``true`` is not a number),
limits, page ranges, text that no column can store, the options that make no sense together.
``fetch.targets`` puts its refusal in a caller's words and compiles grep and jq, the one costly
check, once the cheap ones have passed. The OpenAPI document and the MCP tools' input schemas
are built from ``option_schemas()`` and ``url_schema()``.
"""

from __future__ import annotations

import copy
import re
from functools import cache
from typing import Any, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError, PydanticKnownError

from fetch.render.steps import MAX_STEPS, Action

MAX_PATTERN_CHARS = 1000
MAX_JQ_CHARS = 4000
MAX_QUESTION_CHARS = 2000
MAX_PAGES_CHARS = 200
# A bound for the schema's sake only (about 68 years): no copy is kept longer than the cache TTL.
MAX_AGE_SECONDS = 2**31 - 1
# A signed cursor is about 150 characters; this leaves room and refuses anything bigger unread.
MAX_CURSOR_CHARS = 500
SHA256_PATTERN = r"^[0-9a-f]{64}$"
# Past any text sift reads (FETCH_MAX_BYTES bounds it), and a number every JSON column stores.
MAX_OFFSET = 2**31 - 1
Mode = Literal["markdown", "text", "raw"]
Hidden = Literal["drop", "keep"]
Consent = Literal["reject", "accept", "leave"]
Screenshot = Literal["viewport", "full"]
# A necessary condition only: the page ranges themselves are read by parse_pages.
PAGES_PATTERN = r"^[0-9,\-\s]+$"
_PAGES = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d+)?)?\s*$", re.ASCII)

PageRange = tuple[int, int | None]


class InvalidTarget(ValueError):
    """A target that cannot be accepted; ``field`` names the offending part."""

    def __init__(self, field: str, message: str, hint: str, index: int | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.hint = hint
        self.index = index

    def at(self, index: int) -> InvalidTarget:
        return InvalidTarget(f"targets[{index}].{self.field}", self.message, self.hint, index)


class OptionSet(BaseModel):
    """A set of options as a caller sends them (a target's, a map's): an object of known options,
    each of its JSON type exactly; an option sent as null is left out and takes its default."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _nulls_left_out(cls, raw: Any) -> Any:
        if isinstance(raw, dict):
            return {name: value for name, value in raw.items() if value is not None}
        return raw


def plain_text(value: str) -> str:
    """A text option that holds something, and nothing a database column cannot store (a lone
    surrogate is refused before this, as pydantic's ``string_unicode``)."""
    if not value.strip():
        raise PydanticCustomError("string_blank", "the text is blank")
    if "\x00" in value:
        raise PydanticCustomError("string_nul", "the text holds a NUL character")
    return value


class TargetOptions(OptionSet):
    """A target's options; an option left out, or sent as null, takes its default."""

    mode: Mode = Field(
        default="markdown",
        description="markdown (default): the main content as Markdown; text: the main content as "
        "plain text; raw: the decoded body exactly as served.",
    )
    question: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        description="Keep only the passages that answer this question, best first.",
    )
    pages: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PAGES_CHARS,
        # For the schema only: parse_pages reads the ranges and names the one it cannot read.
        json_schema_extra={"pattern": PAGES_PATTERN},
        description='PDF pages to return, 1-based, e.g. "1-3,7,10-".',
    )
    grep: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PATTERN_CHARS,
        description="Keep only the lines that match this regular expression (RE2 syntax).",
    )
    jq: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_JQ_CHARS,
        description="A jq program applied to a JSON document, e.g. '.items[] | .name'.",
    )
    context: bool | None = Field(
        default=None,
        description="With grep or question: include the neighbouring lines or passages. "
        "Default: on when there is a question.",
    )
    recover: bool = Field(
        default=False, description="When the site fails, answer the last cached copy, marked stale."
    )
    max_age: int | None = Field(
        default=None,
        ge=0,
        le=MAX_AGE_SECONDS,
        description="Seconds: a cached copy older than this is not answered as it is (it is "
        "revalidated or fetched again); 0 always asks the site. Default: the cache TTL.",
    )
    render: bool | Literal["auto"] = Field(
        default=False,
        description="true: run the page's scripts in a headless browser and read the rendered page "
        '(for pages built by JavaScript; slower). "auto": read the page as served, and render it '
        "only when it looks built by scripts (never a PDF, JSON or text); rendered says whether it was.",
    )
    images: bool = Field(
        default=False,
        description="In markdown mode, keep the main content's images as ![alt](absolute URL).",
    )
    hidden: Hidden = Field(
        default="drop",
        description="drop (default): text a reader of the page cannot see (hidden, aria-hidden, "
        "display:none and the like; on a rendered page, what its computed style hides) is left out, "
        "and counted in hidden_chars; keep: read it too.",
    )
    consent: Consent = Field(
        default="reject",
        description="On a rendered page, a cookie-consent banner or wall: reject (default) clicks "
        "its reject, and removes one that offers none, never accepting; accept clicks its accept; "
        "leave leaves it and every overlay as they are. consent_handled says what was done.",
    )
    actions: list[Action] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_STEPS,
        description="With render true (POST and batch only): steps done in order on the rendered "
        'page before it is read, each {"type": ...}: click (selector), scroll (times), wait_for '
        "(selector), wait (milliseconds), press (key); CSS selectors only. A failing step answers "
        "action_failed naming its index.",
    )
    screenshot: Screenshot | None = Field(
        default=None,
        description="With render true: a picture of the rendered page, its viewport or its full "
        "length (at most 16,384 px), as PNG (JPEG past 2 MB, at most 5 MB).",
    )
    robots: bool = Field(
        default=False,
        description="Obey the site's robots.txt for the product token sift: a disallowed URL is "
        "refused blocked.",
    )
    # Page facts (fetch.html.facts): what an HTML page declares about itself, beside its text.
    structured: bool = Field(
        default=False,
        description="On an HTML page: add structured_data (every JSON-LD, microdata, RDFa and "
        "OpenGraph item the page declares, with its syntax and type), structured_errors, "
        "structured_truncated, and product (name, brand, sku, price, currency, availability, rating, "
        "review_count) when the page is about one product. Never part of content.",
    )
    tables: bool = Field(
        default=False,
        description="On an HTML page: add tables, each data table of the main content as "
        "{caption, headers, rows, start} (spanned cells repeated, layout tables left out, start its "
        "offset in the whole text), the same cells as the Markdown table in content.",
    )

    changes: bool = Field(
        default=False,
        description="Compare this reading with your last reading of the same URL with the same "
        "reading options, and answer change: new, same or changed, with a unified diff of the whole "
        "text. Reads from the site (max_age defaults to 0), never a reused answer.",
    )
    max_chars: int | None = Field(
        default=None,
        ge=1,
        description="The longest content to answer, in characters: a longer document is answered "
        "in slices, each cut at a heading or paragraph boundary, with total_chars and next_cursor.",
    )
    cursor: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_CURSOR_CHARS,
        description="The next_cursor of the previous slice: answers the next slice of the same "
        "document version (with the same URL and options), or document_changed.",
    )
    offset: int | None = Field(
        default=None,
        ge=0,
        le=MAX_OFFSET,
        description="With version: answer the text from this character offset into the whole text "
        "(a span's start), or document_changed when the document is no longer that version.",
    )
    version: str | None = Field(
        default=None,
        min_length=64,
        max_length=64,
        pattern=SHA256_PATTERN,
        description="A content_sha256 this fetch must still find (with offset, or from the start).",
    )

    _texts_are_plain = field_validator("question", "pages", "grep", "jq", "cursor", "version")(plain_text)

    @field_validator("pages")
    @classmethod
    def _pages_readable(cls, pages: str) -> str:
        parse_pages(pages)
        return pages

    @field_validator("max_chars")
    @classmethod
    def _max_chars_within_the_setting(cls, max_chars: int) -> int:
        if max_chars > settings.SIFT_FETCH_MAX_CHARS:
            raise PydanticKnownError("less_than_equal", {"le": settings.SIFT_FETCH_MAX_CHARS})
        return max_chars

    @model_validator(mode="after")
    def _one_place_to_start(self) -> TargetOptions:
        """Where a fetch starts reading: a cursor, or an offset into a version, never both; an
        offset only into the whole text, never into grep or question."""
        if self.cursor is not None and (self.offset is not None or self.version is not None):
            raise InvalidTarget(
                "cursor",
                "cursor cannot be sent with offset or version",
                "Send cursor alone to read the next slice, or offset with version to read from an offset.",
            )
        if self.offset is not None and self.version is None:
            raise InvalidTarget(
                "offset",
                "offset needs version",
                "Send version too: the content_sha256 of the answer the offset was taken from.",
            )
        narrowing = "grep" if self.grep is not None else "question" if self.question is not None else None
        if self.offset is not None and narrowing is not None:
            raise InvalidTarget(
                narrowing,
                f"offset reads the whole text, and {narrowing} narrows it",
                f"Leave {narrowing} out to read from an offset (a span's start), or leave offset out.",
            )
        return self

    @model_validator(mode="after")
    def _rendered_only(self) -> TargetOptions:
        """What is done in a browser needs one: actions and screenshot render: true, a consent
        other than the default render true or "auto"."""
        for name in ("actions", "screenshot"):
            if getattr(self, name) is not None and self.render is not True:
                raise InvalidTarget(name, f"{name} needs render: true", f"Send render: true with {name}.")
        if self.consent != "reject" and self.render is False:
            raise InvalidTarget(
                "consent",
                "consent is answered on rendered pages only",
                'Send render: true or "auto" with consent.',
            )
        return self

    @model_validator(mode="after")
    def _facts_of_a_read_page(self) -> TargetOptions:
        """Page facts come from a page that is read: never with mode raw, which serves it as is."""
        asked = "structured" if self.structured else "tables" if self.tables else None
        if asked is not None and self.mode == "raw":
            raise InvalidTarget(
                asked,
                f"{asked} reads the page, and mode raw serves it as is",
                f'Leave {asked} out, or fetch with mode "markdown" or "text".',
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        """The options that differ from their defaults, which is the canonical form."""
        return self.model_dump(exclude_defaults=True)

    @property
    def freshness(self) -> int | None:
        """The ``max_age`` a reading honours: as asked, else 0 with ``changes`` (read from the site)."""
        return self.max_age if self.max_age is not None or not self.changes else 0

    @property
    def page_ranges(self) -> tuple[PageRange, ...] | None:
        return parse_pages(self.pages) if self.pages is not None else None

    @property
    def wants_context(self) -> bool:
        return self.context if self.context is not None else self.question is not None

    @property
    def narrowed(self) -> bool:
        return any(v is not None for v in (self.pages, self.grep, self.jq, self.question))


def option_schemas() -> dict[str, dict[str, Any]]:
    """Each option's JSON Schema, by name, without the null that means "left out"; ``max_chars``
    bounded by ``SIFT_FETCH_MAX_CHARS`` as the settings say now. A copy, the caller's to change."""
    return copy.deepcopy(shared_option_schemas())


def shared_option_schemas() -> dict[str, dict[str, Any]]:
    """``option_schemas()`` to read and never to change: made once for each ``SIFT_FETCH_MAX_CHARS``,
    not copied at each call, since a refusal of a request's options is worded from it."""
    return _option_schemas_for(settings.SIFT_FETCH_MAX_CHARS)


@cache
def _option_schemas_for(most: int) -> dict[str, dict[str, Any]]:
    schemas = copy.deepcopy(known_options())
    schemas["max_chars"]["maximum"] = most
    schemas["max_chars"]["description"] += f" At most, and by default, {most}."
    return schemas


@cache
def known_options() -> dict[str, dict[str, Any]]:
    """Each option's schema as the model says it, made once (never to change); ``option_schemas()``
    adds the limits the settings set."""
    whole = TargetOptions.model_json_schema()
    properties = _inlined(whole["properties"], whole.get("$defs", {}))
    return {name: without_null(schema) for name, schema in properties.items()}


def _inlined(schema: Any, definitions: dict[str, Any]) -> Any:
    """``schema`` with each ``$ref`` to a definition (an action's step) replaced by the definition,
    so that every option's schema stands alone wherever it is put."""
    if isinstance(schema, list):
        return [_inlined(item, definitions) for item in schema]
    if not isinstance(schema, dict):
        return schema
    reference = schema.get("$ref", "")
    if reference.startswith("#/$defs/"):
        return _inlined(definitions[reference.removeprefix("#/$defs/")], definitions)
    # A discriminator's mapping names the definitions, gone once inlined: its property stays.
    return {
        key: {"propertyName": value["propertyName"]}
        if key == "discriminator"
        else _inlined(value, definitions)
        for key, value in schema.items()
    }


def without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without its null branch; an option of two types (``render``) keeps an ``anyOf``
    of them, its string branch an ``enum``, as every string option with fixed values has."""
    kept = {k: v for k, v in schema.items() if k not in ("title", "anyOf") and (k, v) != ("default", None)}
    branches = [_as_enum(branch) for branch in schema.get("anyOf", []) if branch != {"type": "null"}]
    if len(branches) == 1:
        kept.update(branches[0])
    elif branches:
        kept["anyOf"] = branches
    return kept


def _as_enum(branch: dict[str, Any]) -> dict[str, Any]:
    if "const" not in branch:
        return branch
    return {"type": branch["type"], "enum": [branch["const"]]}


def parse_pages(spec: str) -> tuple[PageRange, ...]:
    """``"1-3,7,10-"`` → ``((1, 3), (7, 7), (10, None))``; 1-based, ends inclusive."""
    ranges: list[PageRange] = []
    for part in spec.split(","):
        match = _PAGES.match(part)
        if not match:
            raise InvalidTarget(
                "pages",
                f"cannot read page range {part.strip()!r}",
                'Write pages like "1-3,7,10-": numbers from 1, ranges with a dash.',
            )
        start = int(match[1])
        end = None if match[2] and match[3] is None else int(match[3] or match[1])
        if start < 1 or (end is not None and end < start):
            raise InvalidTarget(
                "pages",
                f"page range {part.strip()!r} is empty or starts before page 1",
                "Pages are numbered from 1 and a range must not run backwards.",
            )
        ranges.append((start, end))
    return tuple(ranges)
