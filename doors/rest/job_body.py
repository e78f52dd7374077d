"""``GET /v1/batch/{id}``'s answer for a job too large to hold whole: written in pieces.

A job's results can be tens of megabytes. Built whole, the answer would stay in the web process
for as long as its client takes to read it, and a client that never reads would hold it for
good. Instead the summary goes first, then the targets a piece at a time (``jobs.next_piece``:
about ``PIECE_BYTES`` of results), each read from the database when the client has taken the one
before. Under ASGI each piece is made in a query thread, never on the event loop. The answer is
the same JSON, byte for byte, as the one built whole: each part goes through the same schemas and
encoder as django-ninja's. A read holds one of its caller's read shares (``batch.waits.READS``)
until its answer ends however it ends.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from django.http import StreamingHttpResponse
from ninja.responses import NinjaJSONEncoder

from batch import jobs, waits
from batch.errors import Refusal, Refused
from batch.models import ApiKey
from batch.summaries import job_summary, target_out
from doors import streams
from doors.rest.schemas import JobSummary, TargetOut
from fetch.outcomes import RetryAfter

log = logging.getLogger(__name__)


def too_large_to_hold(waited: waits.Waited) -> bool:
    return waited.job.n_bytes > jobs.PIECE_BYTES


class PiecewiseResponse(StreamingHttpResponse):
    """A streaming answer whose pieces come from a synchronous iterator one at a time: under
    ASGI, each ``next`` runs in a query thread (Django would read them all before sending).
    ``on_close`` runs when the server closes it: once it is sent, or its client has gone."""

    def __init__(self, pieces: Iterator[str], *, on_close: Callable[[], Any], **kwargs: Any) -> None:
        super().__init__(pieces, **kwargs)
        self.on_close = on_close

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.on_close()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pieces = self.streaming_content
        while (piece := await streams.in_query_thread(next, pieces, None)) is not None:
            yield piece


def job_answer(caller: ApiKey, waited: waits.Waited, *, content: bool) -> PiecewiseResponse:
    """The job's answer in pieces, holding one of the caller's read shares until it ends; or
    ``caller_busy`` when the caller holds them all already."""
    if not waits.READS.take(caller.pk):
        raise Refused(
            Refusal.CALLER_BUSY,
            "you are already reading as many large jobs as you may at once here",
            "Finish reading (or close) another answer first, or read this job without its content "
            "(?content=false) and its targets one by one (GET /v1/batch/{id}/targets/{idx}).",
            retry_after=RetryAfter.JOBS,
        )
    body = _pieces(caller, waited, content=content)
    # Given back when the answer is closed, or when it is dropped unclosed; at most once.
    give_back = weakref.finalize(body, waits.READS.give_back, caller.pk)
    return PiecewiseResponse(body, on_close=give_back, content_type="application/json; charset=utf-8")


def _pieces(caller: ApiKey, waited: waits.Waited, *, content: bool) -> Iterator[str]:
    """``JobOut`` as JSON in parts: the summary, the targets piece by piece, the flag. A job
    deleted while it is read (swept or evicted) ends its list of targets early."""
    summary = _json(JobSummary, job_summary(waited.job, caller))
    yield summary[:-1] + ', "targets": ['
    after, separator = -1, ""
    while True:
        piece = jobs.next_piece(waited.job.id, by="idx", after=after)
        if piece.targets:
            parts = (_json(TargetOut, target_out(t, content=content)) for t in piece.targets)
            yield separator + ", ".join(parts)
            after, separator = piece.targets[-1].idx, ", "
        if not piece.more:
            break
    yield '], "wait_cut_short": ' + json.dumps(waited.cut_short) + "}"


def _json(schema: Any, value: dict[str, Any]) -> str:
    """``value`` as django-ninja answers it through ``schema``."""
    return json.dumps(schema.model_validate(value).model_dump(), cls=NinjaJSONEncoder)
