"""The map endpoints under ``/v1/map``: a site's URLs now, by GET or POST (docs/api.md).

Each one checks the URL and options and calls ``doors.direct.map_for``; nothing is stored.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router

from batch.errors import Refusal, Refused
from doors.auth import KeyAuth, caller_of
from doors.direct import map_for
from doors.rest.map_schemas import MapAnswer, MapIn, MapQuery
from doors.rest.openapi import error_responses
from doors.validation import validate_map

MAP_ERRORS = error_responses(400, 401, 403, 429, 500, 502, 504)

router = Router(auth=KeyAuth(), tags=["map"])


@router.get("", response={200: MapAnswer, **MAP_ERRORS}, summary="List a site's URLs")
def map_get(request: HttpRequest, query: Query[MapQuery]) -> dict[str, Any]:
    unknown = sorted(set(request.GET) - set(MapQuery.model_fields))
    if unknown:
        raise Refused(
            Refusal.INVALID_REQUEST,
            f"unknown query parameter {unknown[0]!r}",
            "Known parameters: " + ", ".join(MapQuery.model_fields) + ".",
        )
    options = query.dict(exclude_none=True, exclude={"url"})
    return map_for(caller_of(request), validate_map(query.url, options))


@router.post(
    "", response={200: MapAnswer, **MAP_ERRORS, **error_responses(413)}, summary="List a site's URLs"
)
def map_post(request: HttpRequest, payload: MapIn) -> dict[str, Any]:
    return map_for(caller_of(request), validate_map(payload.url, payload.options))
