"""``GET /v1/batch/{id}/events``: a job's results as Server-Sent Events (docs/api.md, "Events").

An async view: it checks the key and the job, admits the stream within the deployment's stream
bounds (``doors.stream_bounds``), then hands the stream (``doors.streams``) to the server, which
sends it from the event loop without holding a thread.
"""

from __future__ import annotations

from typing import Annotated

from django.http import HttpRequest, StreamingHttpResponse
from ninja import Header, Query, Router

from batch import jobs
from batch.errors import Refusal, Refused
from batch.models import MAX_DB_INT, ApiKey
from doors import stream_bounds, streams
from doors.auth import BatchAuth, caller_of
from doors.rest.batches import JobId
from doors.rest.openapi import error_responses
from fetch.outcomes import RetryAfter

EVENTS_ERRORS = error_responses(400, 401, 403, 404, 429, 500, 503)

LastEventId = Annotated[
    str | None,
    Header(
        None,
        alias="Last-Event-ID",
        description="Resume after this event id (a target's seq): targets up to it are not sent again.",
        example="3",
    ),
]

# What the stream carries, for the OpenAPI schema (django-ninja declares JSON answers only).
EVENTS_RESPONSE = {
    "description": (
        "text/event-stream. One `target` event per ended target (id: its seq; data: the target as "
        "GET /v1/batch/{id} shows it), those already ended first, then each as it ends; then one "
        "`job` event (data: the job summary, or {id, status: expired} when the job was deleted) "
        "and the stream ends. Comment lines keep a quiet stream open."
    ),
    "content": {
        "text/event-stream": {
            "schema": {"type": "string"},
            "example": 'event: target\nid: 1\ndata: {"idx": 2, "seq": 1, "status": "done", ...}\n\n'
            'event: job\ndata: {"id": "...", "status": "done", ...}\n\n',
        }
    },
}


class StreamAuth(BatchAuth):
    """``BatchAuth`` in the streams' query threads: a connection opened in the request's own
    thread would stay open as long as the stream does."""

    async def __call__(self, request: HttpRequest) -> ApiKey | None:  # type: ignore[override]
        return await streams.in_query_thread(BatchAuth.__call__, self, request)


router = Router(auth=StreamAuth(), tags=["batch"])


@router.get(
    "/{job_id}/events",
    response=EVENTS_ERRORS,
    summary="A job's results as they happen (Server-Sent Events)",
    openapi_extra={"responses": {"200": EVENTS_RESPONSE}},
)
async def batch_events(
    request: HttpRequest,
    job_id: JobId,
    content: bool = Query(True, description="false leaves each result's content out (meta kept)."),
    last_event_id: LastEventId = None,
) -> StreamingHttpResponse:
    caller = caller_of(request)
    after = _resume_after(last_event_id)
    await streams.in_query_thread(jobs.get_job, caller, job_id)
    stream_id = await streams.in_query_thread(stream_bounds.admit, caller, job_id)
    if stream_id is None:
        raise _busy()
    events = streams.job_stream(caller, job_id, stream_id, after=after, content=content)
    response = StreamingHttpResponse(events, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response


def _resume_after(last_event_id: str | None) -> int:
    value = (last_event_id or "0").strip()
    # The length first: int() refuses more digits than Python's limit on a string's conversion.
    if (
        len(value) > len(str(MAX_DB_INT))
        or not (value.isascii() and value.isdigit())
        or int(value) > MAX_DB_INT
    ):
        raise Refused(
            Refusal.INVALID_REQUEST,
            "Last-Event-ID is not an event id",
            "Send the id: of the last event you received (a whole number), or no Last-Event-ID.",
        )
    return int(value)


def _busy() -> Refused:
    return Refused(
        Refusal.BUSY,
        "too many event streams are open (yours, or in all)",
        "Close a stream you no longer read, or try again after Retry-After seconds; "
        "GET /v1/batch/{id}?wait= also waits for a job.",
        retry_after=RetryAfter.JOBS,
    )
