"""The MCP monitor tools (``watch``, ``unwatch``, ``monitors``, ``monitor_changes``): each checks
its arguments through its model here, then calls the monitors service ``/v1/monitors`` calls and
answers what it answers (docs/mcp.md, docs/api.md "Monitors")."""

from __future__ import annotations

from typing import Annotated, Any

from django.conf import settings
from pydantic import Field, WithJsonSchema

from batch.models import JOB_ID_PATTERN, MAX_DB_INT, ApiKey
from batch.monitors import service
from batch.monitors.shapes import change_out, monitor_summary
from doors.callbacks import validate_callback_url
from doors.mcp.inputs import ToolArguments, schema_of
from doors.option_schemas import options_schema, url_schema
from doors.rest.monitor_schemas import every_schema
from doors.rest.schemas import SchemaFrom
from doors.validation import validate_target
from fetch.limits import MAX_URL_CHARS

MonitorId = Annotated[
    str, Field(pattern=JOB_ID_PATTERN, description="The monitor id watch answered: 32 lower-case hex digits.")
]


class WatchArguments(ToolArguments):
    """The body of ``POST /v1/monitors``."""

    # Checked by doors.validation and the monitors service, which name the field they refuse.
    url: Annotated[Any, WithJsonSchema(url_schema())]
    options: Annotated[Any, WithJsonSchema(options_schema())] = None
    every: Annotated[Any, SchemaFrom(every_schema)]
    callback_url: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_URL_CHARS,
        description="Optional: each change is POSTed here as a monitor.changed event, signed with "
        "your key's webhook secret (Standard Webhooks). It must pass the same checks as a fetch.",
    )


class UnwatchArguments(ToolArguments):
    id: MonitorId


class MonitorsArguments(ToolArguments):
    limit: int = Field(20, ge=1, le=100)
    offset: int = Field(0, ge=0, le=MAX_DB_INT)


class ChangesArguments(MonitorsArguments):
    id: MonitorId


def watch(caller: ApiKey, arguments: dict[str, Any]) -> dict[str, Any]:
    target = service.check_target(validate_target({"url": arguments["url"], "options": arguments["options"]}))
    every = service.parse_every(arguments["every"])
    callback_url = validate_callback_url(caller, arguments.get("callback_url"))
    return monitor_summary(service.create(caller, target, every=every, callback_url=callback_url))


def unwatch(caller: ApiKey, arguments: dict[str, Any]) -> dict[str, Any]:
    return monitor_summary(service.delete_monitor(caller, arguments["id"]))


def monitors(caller: ApiKey, arguments: dict[str, Any]) -> dict[str, Any]:
    limit, offset = arguments["limit"], arguments["offset"]
    listed, count = service.list_monitors(caller, limit=limit, offset=offset)
    return {"items": [monitor_summary(m) for m in listed], "count": count, "limit": limit, "offset": offset}


def monitor_changes(caller: ApiKey, arguments: dict[str, Any]) -> dict[str, Any]:
    limit, offset = arguments["limit"], arguments["offset"]
    listed, count = service.changes_of(caller, arguments["id"], limit=limit, offset=offset)
    return {"items": [change_out(c) for c in listed], "count": count, "limit": limit, "offset": offset}


def watch_description() -> str:
    least = settings.SIFT_MONITOR_MIN_EVERY
    return (
        'Watch a page for changes: sift reads it again every `every` (seconds, or "15m", "1h"; '
        f"at least {least:g} seconds) with the options of fetch, compares each reading with the "
        "last one, and keeps each change as a unified diff (read them with monitor_changes); with "
        "callback_url, each change is also POSTed to you, signed. The first reading is the "
        "baseline. Ten failed readings in a row pause the monitor. You may have "
        f"{settings.SIFT_MONITORS_PER_CALLER} monitors; one more is refused too_many_monitors."
    )


def unwatch_description() -> str:
    return "Stop watching: delete one of your monitors (from watch or monitors) with its changes."


def monitors_description() -> str:
    return (
        "Your monitors, newest first: each one's URL, options, every, whether it is paused and "
        "why, its last run (outcome, error) and its last change."
    )


def changes_description() -> str:
    return (
        "The changes one of your monitors found, newest first, each with a unified diff of the "
        "page's text, the lines added and removed, and when it was read."
    )


def watch_arguments() -> dict[str, Any]:
    return schema_of(WatchArguments)


def unwatch_arguments() -> dict[str, Any]:
    return schema_of(UnwatchArguments)


def monitors_arguments() -> dict[str, Any]:
    return schema_of(MonitorsArguments)


def changes_arguments() -> dict[str, Any]:
    return schema_of(ChangesArguments)
