"""Refuse oversized request bodies before anything reads them (413 over ``SIFT_MAX_REQUEST_BYTES``)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from batch.errors import Refusal, error_json


class RequestSizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if not (declared.isascii() and declared.isdigit()):  # isdigit alone accepts "²"
            return error_json(
                Refusal.INVALID_REQUEST, "Content-Length is not a number", "Send a valid Content-Length."
            )
        if int(declared) > settings.SIFT_MAX_REQUEST_BYTES:
            return error_json(
                Refusal.TOO_LARGE,
                f"the request body is larger than {settings.SIFT_MAX_REQUEST_BYTES} bytes",
                "Send fewer or shorter targets per request.",
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
        wrapped = error_json(
            Refusal.METHOD_NOT_ALLOWED,
            f"{request.method} is not allowed on {request.path}",
            f"Use one of: {allowed}." if allowed else "See /v1/docs.",
        )
        if allowed:
            wrapped["Allow"] = allowed
        return wrapped


class SyncChainMiddleware:
    """Last in ``MIDDLEWARE``, and synchronous only: under ASGI, Django then runs the whole chain
    in one request thread, instead of hopping from the event loop to a thread and back for each
    hook of each middleware (docs/decisions.md, "One ASGI web process")."""

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)
