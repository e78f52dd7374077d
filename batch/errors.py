"""The refusals of the API: one table of codes with their HTTP statuses, and the error they ride on.

A fetch's failures are outcomes (``fetch/outcomes.py``); everything else the API refuses
is one of these codes (docs/api.md).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, cast

from django.http import JsonResponse


class Refusal(StrEnum):
    """Why the API will not carry out a request; ``http_status`` is what it answers."""

    _value_: str
    http_status: int

    def __new__(cls, value: str, http_status: int) -> Refusal:
        member = str.__new__(cls, value)
        member._value_ = value
        member.http_status = http_status
        return member

    @classmethod
    def of(cls, code: object) -> Refusal:
        """The refusal whose code is ``code``; ``ValueError`` for anything outside the table."""
        member = cls._value2member_map_.get(code) if isinstance(code, str) else None
        if member is None:
            raise ValueError(f"unknown refusal code {code!r}")
        return cast(Refusal, member)

    INVALID_REQUEST = "invalid_request", 400
    NO_TARGETS = "no_targets", 400
    TOO_MANY_TARGETS = "too_many_targets", 400
    UNAUTHORIZED = "unauthorized", 401
    FORBIDDEN = "forbidden", 403
    NOT_FOUND = "not_found", 404
    METHOD_NOT_ALLOWED = "method_not_allowed", 405
    ALREADY_FINISHED = "already_finished", 409
    TOO_LARGE = "too_large", 413
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused", 422
    CALLER_BUSY = "caller_busy", 429
    BUSY = "busy", 429
    TOO_MANY_MONITORS = "too_many_monitors", 429
    MONITORS_FULL = "monitors_full", 429
    INTERNAL = "internal", 500
    JOBS_BUSY = "jobs_busy", 503
    SERVER_BUSY = "server_busy", 503
    BATCH_DISABLED = "batch_disabled", 503


class Refused(Exception):
    """A request sift will not carry out, with a code and a hint for the agent."""

    def __init__(
        self,
        code: Refusal,
        message: str,
        hint: str,
        *,
        retry_after: int | None = None,
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.code = Refusal.of(code)  # an unknown code is a bug: ValueError
        self.message = message
        self.hint = hint
        self.retry_after = retry_after
        self.details = details

    @property
    def http_status(self) -> int:
        return self.code.http_status


def error_json(code: Refusal, message: str, hint: str) -> JsonResponse:
    """The error envelope outside django-ninja: middleware and Django's own error views."""
    return JsonResponse({"error": message, "code": code, "hint": hint}, status=code.http_status)
