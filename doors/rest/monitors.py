"""The monitor endpoints under ``/v1/monitors``: create, list, read, delete, and a monitor's
changes (docs/api.md, "Monitors"). Each one authenticates, validates, calls one function of the
monitors service (``batch.monitors.service``) and returns a schema."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Path, Query, Router, Status

from batch.models import JOB_ID_PATTERN, MAX_DB_INT
from batch.monitors import service
from batch.monitors.shapes import change_out, monitor_summary
from doors.auth import BatchAuth, caller_of
from doors.callbacks import validate_callback_url
from doors.rest.monitor_schemas import MonitorChangePage, MonitorIn, MonitorOut, MonitorPage
from doors.rest.openapi import error_responses
from doors.validation import validate_target

CREATE_ERRORS = error_responses(400, 401, 403, 413, 422, 429, 500, 503)
LIST_ERRORS = error_responses(400, 401, 403, 500, 503)
ONE_ERRORS = error_responses(400, 401, 403, 404, 500, 503)

MonitorId = Annotated[
    str, Path(pattern=JOB_ID_PATTERN, description="The monitor's id: 32 lower-case hex digits.")
]

router = Router(auth=BatchAuth(), tags=["monitors"])


@router.post("", response={201: MonitorOut, **CREATE_ERRORS}, summary="Watch a page for changes")
def create_monitor(request: HttpRequest, payload: MonitorIn) -> Status:
    caller = caller_of(request)
    target = service.check_target(validate_target({"url": payload.url, "options": payload.options}))
    every = service.parse_every(payload.every)
    callback_url = validate_callback_url(caller, payload.callback_url)
    monitor = service.create(caller, target, every=every, callback_url=callback_url)
    return Status(201, monitor_summary(monitor))


@router.get("", response={200: MonitorPage, **LIST_ERRORS}, summary="List your monitors, newest first")
def list_monitors(
    request: HttpRequest, limit: int = Query(20, ge=1, le=100), offset: int = Query(0, ge=0, le=MAX_DB_INT)
) -> dict[str, Any]:
    listed, count = service.list_monitors(caller_of(request), limit=limit, offset=offset)
    return {"items": [monitor_summary(m) for m in listed], "count": count, "limit": limit, "offset": offset}


@router.get("/{monitor_id}", response={200: MonitorOut, **ONE_ERRORS}, summary="One of your monitors")
def get_monitor(request: HttpRequest, monitor_id: MonitorId) -> dict[str, Any]:
    return monitor_summary(service.get_monitor(caller_of(request), monitor_id))


@router.delete("/{monitor_id}", response={200: MonitorOut, **ONE_ERRORS}, summary="Stop and delete a monitor")
def delete_monitor(request: HttpRequest, monitor_id: MonitorId) -> dict[str, Any]:
    return monitor_summary(service.delete_monitor(caller_of(request), monitor_id))


@router.get(
    "/{monitor_id}/changes",
    response={200: MonitorChangePage, **ONE_ERRORS},
    summary="A monitor's changes, newest first, each with its diff",
)
def monitor_changes(
    request: HttpRequest,
    monitor_id: MonitorId,
    limit: int = Query(20, ge=1, le=100),
    offset: int = Query(0, ge=0, le=MAX_DB_INT),
) -> dict[str, Any]:
    listed, count = service.changes_of(caller_of(request), monitor_id, limit=limit, offset=offset)
    return {"items": [change_out(c) for c in listed], "count": count, "limit": limit, "offset": offset}
