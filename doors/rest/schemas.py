"""Request and response shapes of the JSON API (docs/api.md), also the OpenAPI schema.

A target in a request body is checked at run time by ``doors.validation``: its options by
``fetch.options.TargetOptions``, the one definition of what a target may ask and its one
validator, whose refusal names the offending target and field. The JSON Schema of a target is
that model's, and says the same thing for clients and fuzzers: everything it refuses, validation
refuses too; what it cannot say (a grep or jq program that does not compile, page ranges that
run backwards, options that make no sense together, a port out of range) validation adds.
Schemas that carry a setting are built when the OpenAPI document (or an MCP tool list) is, so
they follow it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from django.conf import settings
from ninja import Field, Schema
from pydantic import ConfigDict, GetJsonSchemaHandler, WithJsonSchema, create_model
from pydantic import Field as PydanticField
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from fetch.cache import CacheState
from fetch.limits import MAX_URL_CHARS
from fetch.options import TargetOptions, option_schemas, options_schema, target_schema, url_schema


@dataclass(frozen=True)
class SchemaFrom:
    """A field's JSON Schema, built by ``build`` each time a schema is generated, not at import."""

    build: Callable[[], dict[str, Any]]

    def __get_pydantic_json_schema__(
        self, core: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return self.build()


def targets_schema() -> dict[str, Any]:
    """A submission's targets: 1 to ``SIFT_BATCH_TARGETS_PER_JOB`` of them, as the settings say now."""
    limit = settings.SIFT_BATCH_TARGETS_PER_JOB
    return {
        "type": "array",
        "minItems": 1,
        "maxItems": limit,
        "items": target_schema(),
        "description": f"The URLs to read, 1 to {limit}. Each target is a URL string, or "
        '{"url": "...", "options": {...}} with options '
        + ", ".join(option_schemas())
        + " (see docs/api.md).",
        "examples": [
            ["https://example.org/", {"url": "https://example.org/a.pdf", "options": {"pages": "1-2"}}]
        ],
    }


class ErrorOut(Schema):
    """The error envelope every error answers with."""

    error: str = Field(..., description="A short message.")
    code: str = Field(..., description="What went wrong, for programs: invalid_request, blocked, ...")
    hint: str = Field(..., description="What to do next.")
    retry_after: int | None = Field(None, description="Seconds to wait; sent with Retry-After.")
    upstream_status: int | None = Field(None, description="The status the upstream site answered.")
    details: Any = Field(None, description="Validation errors: the offending fields.")


class SubmitIn(Schema):
    model_config = ConfigDict(extra="forbid")

    # Checked at run time by doors.validation, which names the target and field it refuses.
    targets: Annotated[list[Any], SchemaFrom(targets_schema)]
    # Checked at run time by the fetch guard (doors/callbacks.py).
    callback_url: str | None = Field(
        None,
        max_length=MAX_URL_CHARS,
        description="When the job finishes, its summary is POSTed here, signed per Standard Webhooks "
        "with your key's webhook secret (docs/webhooks.md). It must pass the same checks as a fetch.",
        examples=["https://agent.example.org/hooks/sift"],
    )


class WebhookAttemptOut(Schema):
    at: datetime
    status: int | None = Field(..., description="The receiver's HTTP status; null when none came.")
    error: str | None = Field(..., description="Why no status came (refused, unreachable, timeout).")


class WebhookOut(Schema):
    """How delivery of the job's webhook stands."""

    url: str
    state: str = Field(
        ...,
        description="waiting (the job has not finished), sending (an attempt is due or retrying), "
        "delivered (a 2xx answer), failed (no 2xx within SIFT_WEBHOOK_RETRY_FOR).",
    )
    attempts: list[WebhookAttemptOut]
    next_attempt_at: datetime | None
    delivered_at: datetime | None


class JobSummary(Schema):
    id: str
    caller: str
    caller_class: str
    status: str
    error: str | None
    targets_total: int
    targets_done: int
    targets_failed: int
    created_at: datetime
    finished_at: datetime | None
    last_read_at: datetime = Field(
        ..., description="When you last submitted, read or listed this job; it lives a TTL from then."
    )
    expires_at: datetime = Field(..., description="last_read_at plus the TTL: when the job is deleted.")
    n_bytes: int
    callback_url: str | None
    webhook: WebhookOut | None


class SubmitOut(JobSummary):
    reused: bool


class TargetOut(Schema):
    idx: int
    url: str
    options: dict[str, Any]
    status: str
    result: dict[str, Any] | None
    error: str | None
    hint: str | None
    outcome: str | None
    attempts: int
    seq: int | None = Field(
        ...,
        description="The target's end sequence number in its job: 1, 2, ... in the order targets "
        "ended (done or failed); null until it ends. The id of its event in /v1/batch/{id}/events.",
    )


class JobOut(JobSummary):
    targets: list[TargetOut]
    wait_cut_short: bool = Field(
        ...,
        description="true when ?wait= was asked for a live job but too many waits were already held "
        "(by you or in all): the job is as it was; poll again, or hold fewer waits at once.",
    )


class JobPage(Schema):
    items: list[JobSummary]
    count: int
    limit: int
    offset: int


class TargetIn(Schema):
    """One target: a URL and its options."""

    model_config = ConfigDict(extra="forbid")

    # Checked at run time by doors.validation, as in a batch.
    url: Annotated[Any, WithJsonSchema(url_schema())]
    options: Annotated[Any, WithJsonSchema(options_schema())] = None


def _query_parameter(name: str, schema: dict[str, Any]) -> Any:
    """An option as a query parameter: read as a string, a boolean or an integer, checked by
    ``TargetOptions``; its schema made when the document is (``max_chars`` follows the settings)."""
    kind: Any = {"boolean": bool, "integer": int}.get(schema.get("type", ""), str)
    if "anyOf" in schema:  # an option of two types (render: a boolean or "auto") is read as either
        kind = TargetOptions.model_fields[name].annotation
    return (Annotated[kind | None, SchemaFrom(lambda: option_schemas()[name])], None)


# The options are the query's fields, one per option of fetch.options, after the URL.
_FetchQueryFields: type[Schema] = create_model(
    "FetchQuery",
    __base__=Schema,
    url=(Annotated[str, WithJsonSchema(url_schema())], ...),
    **{name: _query_parameter(name, schema) for name, schema in option_schemas().items()},
)


class FetchQuery(_FetchQueryFields):  # type: ignore[misc,valid-type]
    """``GET /v1/fetch``: the target's URL and options as query parameters."""


class SpanOut(Schema):
    """Where a grep match or a question passage lies in the whole text (offsets in characters)."""

    start: int
    end: int
    page: int | None = Field(None, description="The PDF page it starts on.")


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
    pages_total: int | None = None
    pages: list[int] | None = None
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
    change: ChangeOut | None = PydanticField(
        None,
        exclude_if=lambda change: change is None,
        description="With changes: true, how this reading differs from your last one; absent otherwise.",
    )
