"""Request and response shapes of the JSON API (SPEC §4), also the OpenAPI schema."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema
from pydantic import ConfigDict

from batch.models import ApiKey, BatchJob, BatchTarget

TARGETS_DESCRIPTION = (
    'Each target is a URL string, or {"url": "...", "options": {...}} with options '
    "mode (markdown|text|raw), question, pages, grep, jq, context, recover (SPEC §3.1)."
)


class ErrorOut(Schema):
    error: str
    code: str
    hint: str
    retry_after: int | None = None
    details: Any = None


class SubmitIn(Schema):
    model_config = ConfigDict(extra="forbid")

    targets: list[Any] = Field(
        ...,
        description=TARGETS_DESCRIPTION,
        examples=[
            ["https://example.org/", {"url": "https://example.org/a.pdf", "options": {"pages": "1-2"}}]
        ],
    )


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
    lease: datetime
    expires_at: datetime
    n_bytes: int


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


def job_summary(job: BatchJob, caller: ApiKey) -> dict[str, Any]:
    """Every job field of SPEC §3.1 but ``idem_key``; ``caller`` is passed to spare a query."""
    return {
        "id": job.id,
        "caller": caller.name,
        "caller_class": job.caller_class,
        "status": job.status,
        "error": job.error or None,
        "targets_total": job.targets_total,
        "targets_done": job.targets_done,
        "targets_failed": job.targets_failed,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
        "lease": job.lease,
        "expires_at": job.expires_at,
        "n_bytes": job.n_bytes,
    }


def target_out(target: BatchTarget, *, content: bool = True) -> dict[str, Any]:
    result = target.result
    if result is not None and not content:
        result = {k: v for k, v in result.items() if k != "content"}
    return {
        "idx": target.idx,
        "url": target.url,
        "options": target.options,
        "status": target.status,
        "result": result,
        "error": target.error or None,
        "hint": target.hint or None,
        "outcome": target.outcome,
        "attempts": target.attempts,
    }


class TargetIn(Schema):
    """One target: a URL and its options (SPEC §3.1)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(..., examples=["https://example.org/article"])
    options: dict[str, Any] | None = Field(None, description=TARGETS_DESCRIPTION)


class FetchQuery(Schema):
    """``GET /v1/fetch``: the target's URL and options as query parameters."""

    url: str
    mode: str | None = None
    question: str | None = None
    pages: str | None = None
    grep: str | None = None
    jq: str | None = None
    context: bool | None = None
    recover: bool | None = None


class FetchEnvelope(Schema):
    """The answer of ``/v1/fetch`` (SPEC §5.7); a batch result's ``meta`` is this without ``content``."""

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
    pages_total: int | None = None
    pages: list[int] | None = None
    matches: int | None = None
    passages: list[dict[str, Any]] | None = None
