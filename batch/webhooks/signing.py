"""Standard Webhooks signatures with the caller's ``whsec_`` secret, and its rotation
(docs/webhooks.md, "Your webhook secret")."""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime

from standardwebhooks import Webhook

from batch.models import ApiKey

log = logging.getLogger(__name__)


def signed_headers(secret: str, event_id: str, body: str, at: datetime) -> dict[str, str]:
    """The three Standard Webhooks headers for one attempt at ``at``, and the body's type."""
    timestamp = math.floor(at.timestamp())
    signature = Webhook(secret).sign(event_id, datetime.fromtimestamp(timestamp, tz=UTC), body)
    return {
        "Content-Type": "application/json",
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }


def rotate_secret(api_key: ApiKey) -> str:
    """A new secret for the caller: the next attempt of any of its webhooks is signed with it."""
    secret = api_key.rotate_webhook_secret()
    log.info("caller %s webhook secret rotated", api_key.name)
    return secret
