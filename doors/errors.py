"""The error envelope both doors answer: ``{"error", "code", "hint"}``, plus ``retry_after``,
``details``, ``upstream_status`` or ``action`` where they apply (docs/api.md). ``doors.rest.errors`` sends it
for the REST API (with ``Retry-After``), ``doors.mcp`` as a tool's error result.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from batch.errors import Refused
from fetch.errors import FetchError
from fetch.outcomes import Outcome, RetryAfter

log = logging.getLogger(__name__)


def _with_retry_after(body: dict[str, Any], seconds: float | None) -> dict[str, Any]:
    if seconds is not None:
        body["retry_after"] = max(1, math.ceil(seconds))
    return body


def refusal_body(exc: Refused) -> dict[str, Any]:
    body: dict[str, Any] = {"error": exc.message, "code": exc.code, "hint": exc.hint}
    if exc.details is not None:
        body["details"] = exc.details
    return _with_retry_after(body, exc.retry_after)


def fetch_error_body(exc: FetchError) -> dict[str, Any]:
    """The outcome is the code; ``upstream_status`` says what the site answered."""
    if exc.outcome == Outcome.INTERNAL:
        log.error("fetch failed inside sift: %s", exc.message)
    body: dict[str, Any] = {"error": exc.message, "code": exc.outcome, "hint": exc.hint}
    if exc.upstream_status is not None:
        body["upstream_status"] = exc.upstream_status
    if exc.action is not None:
        body["action"] = exc.action
    if exc.outcome != Outcome.BUSY:
        return body
    return _with_retry_after(body, exc.retry_after if exc.retry_after is not None else RetryAfter.UPSTREAM)
