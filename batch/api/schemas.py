"""Request and response shapes of the JSON API (docs/api.md), also the OpenAPI schema.

Request bodies are checked at run time by ``fetch.targets`` alone, which names the offending
target and field. The JSON Schema written here says the same thing for clients and fuzzers:
everything it refuses, validation refuses too; what it cannot say (a grep or jq program that
does not compile, page ranges that run backwards, a port out of range) validation adds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from django.conf import settings
from ninja import Field, Schema
from pydantic import ConfigDict, WithJsonSchema

from fetch.targets import (
    MAX_JQ_CHARS,
    MAX_PAGES_CHARS,
    MAX_PATTERN_CHARS,
    MAX_QUESTION_CHARS,
    MAX_URL_CHARS,
    MODES,
)

TARGETS_DESCRIPTION = (
    'Each target is a URL string, or {"url": "...", "options": {...}} with options '
    "mode (markdown|text|raw), question, pages, grep, jq, context, recover, render, robots (see docs/api.md)."
)

# A necessary condition only: http or https, then a host, and no spaces or control characters.
URL_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_URL_CHARS,
    "pattern": r"^[Hh][Tt][Tt][Pp][Ss]?://[^\x00-\x20\x7f]+$",
    "description": "An absolute http:// or https:// URL without user name or password.",
    "examples": ["https://example.org/article"],
}


def _text(max_length: int, description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_length, "description": description, **extra}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


OPTION_SCHEMAS: dict[str, dict[str, Any]] = {
    "mode": {
        "type": "string",
        "enum": list(MODES),
        "default": "markdown",
        "description": "markdown: main content as Markdown; text: plain text; raw: the body as served.",
    },
    "question": _text(MAX_QUESTION_CHARS, "Keep only the passages that answer it."),
    "pages": _text(
        MAX_PAGES_CHARS, 'PDF pages to return, 1-based, e.g. "1-3,7,10-".', pattern=r"^[0-9,\-\s]+$"
    ),
    "grep": _text(MAX_PATTERN_CHARS, "Keep only the lines this RE2 pattern matches."),
    "jq": _text(MAX_JQ_CHARS, "A jq program applied to a JSON document."),
    "context": {"type": "boolean", "description": "Include neighbouring lines or passages."},
    "recover": {"type": "boolean", "description": "When the upstream fails, serve the last cached copy."},
    "render": {
        "type": "boolean",
        "description": "Run the page's scripts in a headless browser and read the rendered page.",
    },
    "robots": {"type": "boolean", "description": "Obey the site's robots.txt (product token sift)."},
}
OPTIONS_SCHEMA: dict[str, Any] = _nullable(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            name: schema if name == "mode" else _nullable(schema) for name, schema in OPTION_SCHEMAS.items()
        },
    }
)
TARGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["url"],
    "properties": {"url": URL_SCHEMA, "options": OPTIONS_SCHEMA},
}
TARGETS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "maxItems": settings.SIFT_BATCH_TARGETS_PER_JOB,
    "items": {"anyOf": [URL_SCHEMA, TARGET_SCHEMA]},
    "description": TARGETS_DESCRIPTION,
    "examples": [["https://example.org/", {"url": "https://example.org/a.pdf", "options": {"pages": "1-2"}}]],
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

    # Checked at run time by fetch.targets, which names the target and field it refuses.
    targets: Annotated[list[Any], WithJsonSchema(TARGETS_SCHEMA)]
    # Checked at run time by the fetch guard (batch/api/callbacks.py).
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

    # Checked at run time by fetch.targets, as in a batch.
    url: Annotated[Any, WithJsonSchema(URL_SCHEMA)]
    options: Annotated[Any, WithJsonSchema(OPTIONS_SCHEMA)] = None


def _query(name: str) -> Any:
    return WithJsonSchema(OPTION_SCHEMAS[name])


class FetchQuery(Schema):
    """``GET /v1/fetch``: the target's URL and options as query parameters."""

    url: Annotated[str, WithJsonSchema(URL_SCHEMA)]
    mode: Annotated[str | None, _query("mode")] = None
    question: Annotated[str | None, _query("question")] = None
    pages: Annotated[str | None, _query("pages")] = None
    grep: Annotated[str | None, _query("grep")] = None
    jq: Annotated[str | None, _query("jq")] = None
    context: Annotated[bool | None, _query("context")] = None
    recover: Annotated[bool | None, _query("recover")] = None
    render: Annotated[bool | None, _query("render")] = None
    robots: Annotated[bool | None, _query("robots")] = None


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
    cached: bool
    stale: bool
    cached_at: str | None = None
    lang: str | None = None
    canonical_url: str | None = None
    rendered: bool | None = None
    pages_total: int | None = None
    pages: list[int] | None = None
    matches: int | None = None
    passages: list[dict[str, Any]] | None = None
