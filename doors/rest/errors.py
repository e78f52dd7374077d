"""How every error, sift's or django-ninja's, leaves the REST API: the one envelope
(``doors.errors``), with ``Retry-After`` when it says when to come back (docs/api.md)."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from batch.errors import Refusal, Refused
from doors.errors import fetch_error_body, refusal_body
from doors.rest.parser import BodyRefused
from fetch.errors import FetchError
from fetch.outcomes import Outcome

log = logging.getLogger(__name__)

# django-ninja's own HTTP errors, as refusals.
_REFUSAL_BY_STATUS = {400: Refusal.INVALID_REQUEST, 404: Refusal.NOT_FOUND, 413: Refusal.TOO_LARGE}


def _envelope(api: NinjaAPI, request: HttpRequest, status: int, body: dict[str, Any]) -> HttpResponse:
    response = api.create_response(request, body, status=status)
    if "retry_after" in body:
        response["Retry-After"] = str(body["retry_after"])
    return response


def error_response(api: NinjaAPI, request: HttpRequest, exc: Refused) -> HttpResponse:
    return _envelope(api, request, exc.http_status, refusal_body(exc))


def on_fetch_error(api: NinjaAPI, request: HttpRequest, exc: FetchError) -> HttpResponse:
    return _envelope(api, request, exc.http_status, fetch_error_body(exc))


_BATCH_SHAPE_HINT = 'Check the request against /v1/docs; a batch body is {"targets": ["https://..."]}.'
_FETCH_SHAPE_HINT = (
    "Check the request against /v1/docs; a fetch is GET /v1/fetch?url=https://... "
    'or POST {"url": "https://..."}.'
)


_MAP_SHAPE_HINT = (
    "Check the request against /v1/docs; a map is GET /v1/map?url=https://... "
    'or POST {"url": "https://...", "options": {"limit": 100}}.'
)


def _shape_hint(path: str) -> str:
    if path.startswith("/v1/fetch"):
        return _FETCH_SHAPE_HINT
    return _MAP_SHAPE_HINT if path.startswith("/v1/map") else _BATCH_SHAPE_HINT


def on_validation_error(api: NinjaAPI, request: HttpRequest, exc: ValidationError) -> HttpResponse:
    details = [
        {"field": ".".join(str(p) for p in e["loc"][1:] if p != "payload") or "body", "message": e["msg"]}
        for e in exc.errors
    ]
    first = details[0]
    refused = Refused(
        Refusal.INVALID_REQUEST,
        f"{first['field']}: {first['message']}",
        _shape_hint(request.path_info),
        details=details,
    )
    return error_response(api, request, refused)


def on_unauthenticated(api: NinjaAPI, request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    refused = Refused(
        Refusal.UNAUTHORIZED, "missing or unknown API key", "Send Authorization: Bearer <your key>."
    )
    return error_response(api, request, refused)


def on_http_error(api: NinjaAPI, request: HttpRequest, exc: HttpError) -> HttpResponse:
    cause = exc.__cause__
    if isinstance(cause, BodyRefused):
        details = None if cause.field is None else [{"field": cause.field, "message": str(cause)}]
        refused = Refused(Refusal.INVALID_REQUEST, str(cause), cause.hint, details=details)
    else:
        code = _REFUSAL_BY_STATUS.get(exc.status_code, Refusal.INVALID_REQUEST)
        refused = Refused(code, str(exc), "Check the request against /v1/docs.")
    return error_response(api, request, refused)


DATABASE_RETRY_AFTER_SECONDS = 2


def on_database_unavailable(api: NinjaAPI, request: HttpRequest, exc: OperationalError) -> HttpResponse:
    """The database refused or dropped a connection (full, restarting, pool exhausted): try again."""
    log.warning("database unavailable in %s %s: %s", request.method, request.path, exc)
    refused = Refused(
        Refusal.SERVER_BUSY,
        "the database is busy or unreachable",
        "Send the same request again after Retry-After seconds.",
        retry_after=DATABASE_RETRY_AFTER_SECONDS,
    )
    return error_response(api, request, refused)


def on_unexpected(api: NinjaAPI, request: HttpRequest, exc: Exception) -> HttpResponse:
    log.exception("unhandled error in %s %s", request.method, request.path)
    return error_response(api, request, Refused(Refusal.INTERNAL, "internal error", Outcome.INTERNAL.hint))


def install_error_handlers(api: NinjaAPI) -> None:
    api.add_exception_handler(FetchError, partial(on_fetch_error, api))
    api.add_exception_handler(Refused, partial(error_response, api))
    api.add_exception_handler(ValidationError, partial(on_validation_error, api))
    api.add_exception_handler(AuthenticationError, partial(on_unauthenticated, api))
    api.add_exception_handler(HttpError, partial(on_http_error, api))
    api.add_exception_handler(OperationalError, partial(on_database_unavailable, api))
    api.add_exception_handler(Exception, partial(on_unexpected, api))
