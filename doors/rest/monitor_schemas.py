"""Request and answer shapes of ``/v1/monitors`` (docs/api.md, "Monitors"), also the MCP monitor
tools' output schemas."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from django.conf import settings
from ninja import Field, Schema
from pydantic import ConfigDict, WithJsonSchema

from doors.option_schemas import options_schema, url_schema
from doors.rest.schemas import SchemaFrom
from fetch.limits import MAX_URL_CHARS


def every_schema() -> dict[str, Any]:
    """``every``: seconds, or a duration string; at least ``SIFT_MONITOR_MIN_EVERY`` as set now."""
    least = settings.SIFT_MONITOR_MIN_EVERY
    return {
        "anyOf": [{"type": "integer"}, {"type": "string", "pattern": r"^\d{1,10}(s|m|h|d)?$"}],
        "description": f'How often to read the page: seconds, or "90s", "5m", "1h", "1d"; at least '
        f"{least:g} seconds, at most 30 days.",
        "examples": ["15m", 3600],
    }


class MonitorIn(Schema):
    model_config = ConfigDict(extra="forbid")

    # Checked at run time by doors.validation and the monitors service, which name the field.
    url: Annotated[Any, WithJsonSchema(url_schema())]
    options: Annotated[Any, WithJsonSchema(options_schema())] = None
    every: Annotated[Any, SchemaFrom(every_schema)]
    callback_url: str | None = Field(
        None,
        max_length=MAX_URL_CHARS,
        description="Each change is POSTed here as a monitor.changed event, signed per Standard "
        "Webhooks with your key's webhook secret (docs/webhooks.md). It must pass the same checks "
        "as a fetch.",
    )


class MonitorOut(Schema):
    id: str
    url: str
    options: dict[str, Any]
    every: int = Field(..., description="Seconds between two runs.")
    callback_url: str | None
    created_at: datetime
    paused: bool
    paused_reason: str | None = Field(..., description="Why it is paused: failed runs in a row, or staff.")
    next_run_at: datetime | None = Field(..., description="When it runs next; null while paused.")
    runs: int
    failures_in_a_row: int
    last_run_at: datetime | None
    last_outcome: str | None = Field(..., description="ok, or the outcome of the last run's failure.")
    last_error: str | None
    last_change_at: datetime | None
    changes_url: str


class MonitorPage(Schema):
    items: list[MonitorOut]
    count: int
    limit: int
    offset: int


class MonitorChangeOut(Schema):
    at: datetime = Field(..., description="When the run that found the change read the page.")
    previous_at: datetime | None = Field(..., description="When the reading compared with was made.")
    diff: str = Field(..., description="A unified diff of the whole text's lines, cut to max_chars.")
    added: int
    removed: int
    diff_truncated: bool


class MonitorChangePage(Schema):
    items: list[MonitorChangeOut]
    count: int = Field(..., description="Changes kept: the newest 100 of the monitor.")
    limit: int
    offset: int
