"""The web process's middleware: request bodies bounded (413 over ``SIFT_MAX_REQUEST_BYTES``) and
answers a client must take in time (``SIFT_SEND_TIMEOUT``), both at the ASGI edge; JSON 405 for
API paths; the last, sync-only middleware that keeps the whole chain in one request thread."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from batch.errors import Refusal, Refused, error_json
from batch.threads import ThreadShares
from doors.errors import refusal_body
from fetch.outcomes import RetryAfter

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Message], Any]

# Where documents are uploaded (docs/api.md, "Uploads"): bodies up to SIFT_UPLOAD_MAX_BYTES.
UPLOAD_PATH = "/v1/read"
# Uploads in flight in this process (their bodies are held in memory), per caller and in all.
UPLOADS = ThreadShares(lambda: settings.SIFT_UPLOADS_PER_CALLER, lambda: settings.SIFT_UPLOADS_TOTAL)


class BoundedRequests:
    """ASGI, around the web process's Django (``sift_site/asgi.py``).

    Django's ASGI handler reads a whole body into a temporary file before any middleware runs,
    so a body is read here first: refused 413 as soon as it is known to be over
    ``SIFT_MAX_REQUEST_BYTES`` — by its ``Content-Length`` before a byte is read, or while a
    chunked body is read — and the connection closed, whoever sent it. Then each piece of the
    answer must be taken by the client within ``SIFT_SEND_TIMEOUT``: an answer nobody reads
    is dropped as if its client had gone, so it holds no memory, stream or share for long.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        upload = scope.get("method") == "POST" and scope.get("path") == UPLOAD_PATH
        try:
            # An upload's caller is known only once Django has checked its key: its share is
            # held under its key's digest (requests without a key share one), before a byte is read.
            with upload_share(_digest(header_of(scope, b"authorization"))) if upload else _no_share():
                limit = settings.SIFT_UPLOAD_MAX_BYTES if upload else settings.SIFT_MAX_REQUEST_BYTES
                body = await request_body(scope, receive, limit=limit)
                if body is not None:  # None: the client went away while sending it
                    await self.app(scope, replay(body, receive), taken_in_time(send))
        except Refused as exc:
            await send_refusal(exc, send, close=True)


@contextmanager
def upload_share(key: int) -> Iterator[None]:
    """One of this process's upload shares for ``key`` (a caller), held while the block runs;
    none free: ``caller_busy`` (the caller's) or ``server_busy`` (all of them)."""
    if UPLOADS.take(key):
        try:
            yield
        finally:
            UPLOADS.give_back(key)
        return
    if UPLOADS.held(key) >= settings.SIFT_UPLOADS_PER_CALLER:
        raise Refused(
            Refusal.CALLER_BUSY,
            f"you already have {settings.SIFT_UPLOADS_PER_CALLER} uploads in flight here",
            "Wait for one of them to answer, then send the next.",
            retry_after=RetryAfter.PARSER,
        )
    raise Refused(
        Refusal.SERVER_BUSY,
        "too many uploads are in flight here",
        "Send it again in a few seconds.",
        retry_after=RetryAfter.PARSER,
    )


@contextmanager
def _no_share() -> Iterator[None]:
    yield


def _digest(value: str) -> int:
    return int.from_bytes(hashlib.sha256(value.encode("utf-8", "replace")).digest()[:8], "big")


async def request_body(scope: Scope, receive: Receive, *, limit: int | None = None) -> bytes | None:
    """The whole request body, refused ``too_large`` past ``limit`` (``SIFT_MAX_REQUEST_BYTES``
    by default) as soon as it is known to be (the declared length, else the bytes received);
    ``None`` on a disconnect."""
    limit = settings.SIFT_MAX_REQUEST_BYTES if limit is None else limit
    declared = header_of(scope, b"content-length")
    if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
        raise too_large(limit)
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        body += message.get("body", b"")
        if len(body) > limit:
            raise too_large(limit)
        if not message.get("more_body", False):
            return bytes(body)


def header_of(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1").strip()
    return ""


def too_large(limit: int) -> Refused:
    hint = (
        "Send a smaller document, or fewer of its pages saved as one."
        if limit > settings.SIFT_MAX_REQUEST_BYTES
        else "Send fewer or shorter targets per request."
    )
    return Refused(Refusal.TOO_LARGE, f"the request body is larger than {limit} bytes", hint)


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` for the application: the body already read, then whatever the client sends
    next (a disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed


async def send_refusal(exc: Refused, send: Send, *, close: bool = False) -> None:
    """The error envelope as a whole ASGI answer; ``close`` ends the connection after it (a body
    left unread must not be read as the next request)."""
    envelope = refusal_body(exc)
    body = json.dumps(envelope).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    if exc.code in (Refusal.UNAUTHORIZED, Refusal.FORBIDDEN):
        headers.append((b"www-authenticate", b'Bearer realm="sift"'))
    if exc.code == Refusal.METHOD_NOT_ALLOWED:
        headers.append((b"allow", b"POST"))
    if "retry_after" in envelope:
        headers.append((b"retry-after", str(envelope["retry_after"]).encode()))
    await send({"type": "http.response.start", "status": exc.http_status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def taken_in_time(send: Send) -> Send:
    """``send`` whose pieces of a body must be taken within ``SIFT_SEND_TIMEOUT``.

    The server's ``send`` waits while the client takes nothing (its buffers are full). Past the
    timeout the answer is abandoned the way Django abandons one whose client went away (it
    stops sending on ``CancelledError`` and closes the response, which ends its stream and
    gives its shares back); the server then closes the connection.
    """

    async def send_in_time(message: Message) -> None:
        if message["type"] != "http.response.body":
            await send(message)
            return
        try:
            async with asyncio.timeout(settings.SIFT_SEND_TIMEOUT):
                await send(message)
        except TimeoutError:
            log.info("a client took none of its answer for %ss: dropped", settings.SIFT_SEND_TIMEOUT)
            raise asyncio.CancelledError from None

    return send_in_time


class RequestSizeLimitMiddleware:
    """413 over ``SIFT_MAX_REQUEST_BYTES`` by ``Content-Length``, for a WSGI server and the test
    client (under ASGI, ``BoundedRequests`` has refused it already)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if not (declared.isascii() and declared.isdigit()):  # isdigit alone accepts "²"
            return error_json(
                Refusal.INVALID_REQUEST, "Content-Length is not a number", "Send a valid Content-Length."
            )
        upload = request.method == "POST" and request.path == UPLOAD_PATH
        limit = settings.SIFT_UPLOAD_MAX_BYTES if upload else settings.SIFT_MAX_REQUEST_BYTES
        if len(declared) > 18 or int(declared) > limit:
            exc = too_large(limit)
            return error_json(exc.code, exc.message, exc.hint)
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
