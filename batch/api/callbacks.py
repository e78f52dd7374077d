"""A submit's ``callback_url``: refused at once unless the fetch guard would let a POST reach it.

The guard runs again at every delivery attempt (``batch.adapter.post_webhook``): a name that
resolves elsewhere later is refused then. See docs/webhooks.md.
"""

from __future__ import annotations

from batch.errors import Refusal, Refused
from fetch import guard
from fetch.errors import FetchError

FIELD = "callback_url"


def validate_callback_url(raw: str | None) -> str:
    """The URL to store (``""`` for none), or 400 ``invalid_request`` naming the field."""
    if not raw:
        return ""
    try:
        guard.check_url(raw)
    except FetchError as exc:
        reason = exc.message.removeprefix("refused to fetch: ")
        raise Refused(
            Refusal.INVALID_REQUEST,
            f"{FIELD}: {reason}",
            f"The callback URL must pass the same checks as a fetch. {exc.hint}",
            details=[{"field": FIELD, "message": reason}],
        ) from None
    return raw
