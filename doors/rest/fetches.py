"""The fetch endpoints under ``/v1/fetch``: one target fetched now, by GET or POST (docs/api.md).

Each one validates the target and calls ``doors.direct.fetch_for``; no job is stored.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router

from batch.errors import Refusal, Refused
from doors.auth import KeyAuth, caller_of
from doors.direct import fetch_for
from doors.rest.envelope import FetchEnvelope
from doors.rest.openapi import error_responses
from doors.rest.schemas import BODY_ONLY, FetchQuery, TargetIn
from doors.validation import validate_target

FETCH_ERRORS = error_responses(400, 401, 403, 409, 415, 422, 429, 500, 502, 504)

router = Router(auth=KeyAuth(), tags=["fetch"])


@router.get("", response={200: FetchEnvelope, **FETCH_ERRORS}, summary="Fetch one URL now")
def fetch_get(request: HttpRequest, query: Query[FetchQuery]) -> dict[str, Any]:
    in_body = sorted(BODY_ONLY & set(request.GET))
    if in_body:
        raise Refused(
            Refusal.INVALID_REQUEST,
            f"{in_body[0]} is not taken in a query",
            f'Send {in_body[0]} in the JSON body of POST /v1/fetch: {{"url": ..., "options": '
            f'{{"render": true, "{in_body[0]}": [...]}}}}, or in a batch target.',
        )
    unknown = sorted(set(request.GET) - set(FetchQuery.model_fields))
    if unknown:
        raise Refused(
            Refusal.INVALID_REQUEST,
            f"unknown query parameter {unknown[0]!r}",
            "Known parameters: " + ", ".join(FetchQuery.model_fields) + ".",
        )
    options = query.dict(exclude_none=True, exclude={"url"})
    return fetch_for(caller_of(request), validate_target({"url": query.url, "options": options}))


@router.post(
    "", response={200: FetchEnvelope, **FETCH_ERRORS, **error_responses(413)}, summary="Fetch one target now"
)
def fetch_post(request: HttpRequest, payload: TargetIn) -> dict[str, Any]:
    return fetch_for(caller_of(request), validate_target(payload.dict(exclude_unset=True)))
