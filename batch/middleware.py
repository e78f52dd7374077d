"""Refuse oversized request bodies before anything reads them (SPEC §4: 413 over 128 KiB)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


class RequestSizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if not declared.isdigit():
            return JsonResponse(
                {"error": "Content-Length is not a number", "code": "invalid_request", "hint": "Send a valid Content-Length."},
                status=400,
            )
        if int(declared) > settings.SIFT_MAX_REQUEST_BYTES:
            return JsonResponse(
                {
                    "error": f"the request body is larger than {settings.SIFT_MAX_REQUEST_BYTES} bytes",
                    "code": "too_large",
                    "hint": "Send fewer or shorter targets per request.",
                },
                status=413,
            )
        return self.get_response(request)
