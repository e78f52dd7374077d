"""``POST /v1/read``: a document sent by its caller, read now (docs/api.md, "Uploads").

The document is the body itself (its ``Content-Type`` says what it is, or the bytes do), or the
one ``file`` of a ``multipart/form-data`` body; its options are query parameters, those of a
fetch but the ones that need a site. The body is bounded by ``SIFT_UPLOAD_MAX_BYTES`` while it
streams in (``doors.middleware``); nothing of it is stored.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router

from batch.errors import Refusal, Refused
from doors.auth import KeyAuth, caller_of
from doors.direct import read_for
from doors.rest.envelope import FetchEnvelope
from doors.rest.openapi import error_responses
from doors.rest.schemas import ReadQuery
from doors.validation import refuse_site_option, validate_upload_options
from fetch.documents.uploads import Upload
from fetch.targets import SITE_OPTIONS

READ_ERRORS = error_responses(400, 401, 409, 413, 415, 422, 429, 500, 503)
BODY_HINT = 'Send the file as the body, or as multipart/form-data with one part named "file".'
_BODY = {
    "required": True,
    "content": {
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "properties": {"file": {"type": "string", "format": "binary"}},
            }
        },
    },
}

router = Router(auth=KeyAuth(), tags=["read"])


@router.post(
    "",
    response={200: FetchEnvelope, **READ_ERRORS},
    summary="Read an uploaded document now",
    openapi_extra={"requestBody": _BODY},
)
def read_post(request: HttpRequest, query: Query[ReadQuery]) -> dict[str, Any]:
    given = set(request.GET)
    site = sorted(given & set(SITE_OPTIONS))
    if site:
        raise refuse_site_option(site[0], flat=True)
    unknown = sorted(given - set(ReadQuery.model_fields))
    if unknown:
        raise Refused(
            Refusal.INVALID_REQUEST,
            f"unknown query parameter {unknown[0]!r}",
            "Known parameters: " + ", ".join(ReadQuery.model_fields) + ".",
        )
    options = validate_upload_options(query.dict(exclude_none=True, exclude={"name"}), flat=True)
    return read_for(caller_of(request), uploaded(request, name=query.name), options)


def uploaded(request: HttpRequest, *, name: str | None) -> Upload:
    """The document of the request: its one ``file`` part, or the whole body."""
    if request.content_type != "multipart/form-data":
        # read(), not body: the body may be larger than Django's limit for form data.
        return Upload(request.read(), request.META.get("CONTENT_TYPE", ""), name or "")
    files = request.FILES
    parts = files.getlist("file")
    if list(files) != ["file"] or len(parts) != 1 or request.POST:
        raise Refused(
            Refusal.INVALID_REQUEST, "the form must hold one file, named file, and nothing else", BODY_HINT
        )
    part = parts[0]
    return Upload(part.read(), part.content_type or "", name or part.name or "")
