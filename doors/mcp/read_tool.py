"""The MCP tool ``read``'s arguments: a document the caller holds, in base64, and the options
beside it, checked as ``POST /v1/read`` checks them (docs/mcp.md)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.conf import settings

from batch.errors import Refusal, Refused
from doors.mcp.inputs import ARGUMENTS_HINT
from doors.validation import refuse_site_option, validate_upload_options
from fetch.documents.uploads import Upload
from fetch.targets import SITE_OPTIONS, TargetOptions

_DOCUMENT_ARGUMENTS = ("content", "media_type", "name")


def read_request(arguments: dict[str, Any]) -> tuple[Upload, TargetOptions]:
    """The document (base64 content, media type, name) and the options beside it, validated as
    ``/v1/read`` validates them; a document over ``SIFT_UPLOAD_MAX_BYTES`` is ``too_large``."""
    site = sorted(set(arguments) & set(SITE_OPTIONS))
    if site:
        raise refuse_site_option(site[0], flat=True)
    texts = {name: arguments.get(name, "") for name in _DOCUMENT_ARGUMENTS}
    wrong = next((name for name, value in texts.items() if not isinstance(value, str)), None)
    if wrong is not None or not texts["content"]:
        field = wrong or "content"
        raise Refused(Refusal.INVALID_REQUEST, f"{field}: a string is needed", ARGUMENTS_HINT)
    limit = settings.SIFT_UPLOAD_MAX_BYTES
    if len(texts["content"]) > (limit + 2) // 3 * 4 + 4:
        raise Refused(
            Refusal.TOO_LARGE, f"the document is larger than {limit} bytes", "Send a smaller document."
        )
    try:
        body = base64.b64decode(texts["content"], validate=True)
    except (binascii.Error, ValueError):
        raise Refused(
            Refusal.INVALID_REQUEST, "content: not base64", "Send the document's bytes in base64."
        ) from None
    options = {name: value for name, value in arguments.items() if name not in _DOCUMENT_ARGUMENTS}
    return Upload(body, texts["media_type"][:255], texts["name"][:255]), validate_upload_options(
        options, flat=True
    )
