"""The fetch endpoints under ``/v1/fetch``: one target fetched now, by GET or POST (docs/api.md).

This is the HTTP surface calling the fetch pipeline directly; no job is stored.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Query, Router

from batch.api.auth import KeyAuth, caller_of
from batch.api.openapi import error_responses
from batch.api.schemas import FetchEnvelope, FetchQuery, TargetIn
from batch.api.validation import validate_target
from batch.errors import Refusal, Refused
from batch.models import ApiKey
from batch.threads import ThreadShares
from fetch import cache, pipeline
from fetch.errors import FetchError
from fetch.outcomes import Outcome, RetryAfter

FETCH_ERRORS = error_responses(400, 401, 403, 415, 422, 429, 500, 502, 504)

# Each caller's fetches in flight in this process, at most SIFT_FETCH_PER_CALLER.
FETCHES = ThreadShares(lambda: settings.SIFT_FETCH_PER_CALLER, lambda: None)

router = Router(auth=KeyAuth(), tags=["fetch"])


def fetch_for(caller: ApiKey, raw_target: object) -> dict[str, Any]:
    """One target fetched now for ``caller``: what ``/v1/fetch`` and the MCP ``fetch`` tool both do.

    A fetch may hold its request thread for the gate wait and the whole deadline, so a caller
    has only ``SIFT_FETCH_PER_CALLER`` of them in flight per process; one more answers busy.
    """
    target = validate_target(raw_target)
    with FETCHES.share(caller.pk) as granted:
        if not granted:
            raise FetchError(
                Outcome.BUSY,
                f"you already have {settings.SIFT_FETCH_PER_CALLER} fetches in flight here",
                "Wait for one of them to answer, or send many URLs as one batch (POST /v1/batch).",
                retry_after=RetryAfter.FETCH,
            )
        return pipeline.fetch(target, partition=cache.partition_for(caller.name, caller.caller_class))


@router.get("", response={200: FetchEnvelope, **FETCH_ERRORS}, summary="Fetch one URL now")
def fetch_get(request: HttpRequest, query: Query[FetchQuery]) -> dict[str, Any]:
    unknown = sorted(set(request.GET) - set(FetchQuery.model_fields))
    if unknown:
        raise Refused(
            Refusal.INVALID_REQUEST,
            f"unknown query parameter {unknown[0]!r}",
            "Known parameters: " + ", ".join(FetchQuery.model_fields) + ".",
        )
    options = query.dict(exclude_none=True, exclude={"url"})
    return fetch_for(caller_of(request), {"url": query.url, "options": options})


@router.post(
    "", response={200: FetchEnvelope, **FETCH_ERRORS, **error_responses(413)}, summary="Fetch one target now"
)
def fetch_post(request: HttpRequest, payload: TargetIn) -> dict[str, Any]:
    return fetch_for(caller_of(request), payload.dict(exclude_unset=True))
