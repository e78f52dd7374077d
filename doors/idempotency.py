"""The ``Idempotency-Key`` header of ``POST /v1/batch`` (and MCP's ``idempotency_key``) (docs/api.md).

A key names one request of one caller: sent again with the same targets and callback URL it
answers the same job; with anything else, 422 ``idempotency_key_reused`` (``batch.jobs``).
"""

from __future__ import annotations

import re

from batch.errors import Refusal, Refused

HEADER = "Idempotency-Key"
MAX_LENGTH = 255
# Printable ASCII, space included but not at either end (HTTP trims it there anyway).
_PRINTABLE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")
HINT = (
    f"Send {HEADER} as 1 to {MAX_LENGTH} printable ASCII characters, such as a UUID "
    "made once per request and resent unchanged with its retries."
)


def validate_idempotency_key(value: str | None, *, name: str = HEADER) -> str | None:
    """``value`` when it can name a request; ``None`` when absent; 400 ``invalid_request`` otherwise."""
    if value is None:
        return None
    if len(value) > MAX_LENGTH:
        problem = f"is {len(value)} characters long, more than {MAX_LENGTH}"
    elif not _PRINTABLE.fullmatch(value):
        problem = "is empty" if not value.strip() else "holds characters other than printable ASCII"
    else:
        return value
    raise Refused(
        Refusal.INVALID_REQUEST,
        f"{name} {problem}",
        HINT.replace(HEADER, name),
        details=[{"field": name, "message": problem}],
    )
