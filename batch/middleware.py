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
                {
                    "error": "Content-Length is not a number",
                    "code": "invalid_request",
                    "hint": "Send a valid Content-Length.",
                },
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


class JsonMethodNotAllowedMiddleware:
    """django-ninja answers a wrong method with Django's empty HTML 405; API paths get the envelope."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or not request.path.startswith("/v1/"):
            return response
        allowed = response.get("Allow", "")
        wrapped = JsonResponse(
            {
                "error": f"{request.method} is not allowed on {request.path}",
                "code": "method_not_allowed",
                "hint": f"Use one of: {allowed}." if allowed else "See /v1/docs.",
            },
            status=405,
        )
        if allowed:
            wrapped["Allow"] = allowed
        return wrapped
