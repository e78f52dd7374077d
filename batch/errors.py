"""The one domain error the API turns into its error envelope (SPEC §4)."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse


class Refused(Exception):
    """A request sift will not carry out, with a code and a hint for the agent.

    ``code`` is one of the codes of SPEC §3.2, §3.5 and §4; the API maps it to an HTTP status.
    """

    def __init__(
        self,
        code: str,
        message: str,
        hint: str,
        *,
        retry_after: int | None = None,
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.retry_after = retry_after
        self.details = details


def error_json(status: int, code: str, message: str, hint: str) -> JsonResponse:
    """The error envelope outside django-ninja: middleware and Django's own error views."""
    return JsonResponse({"error": message, "code": code, "hint": hint}, status=status)
