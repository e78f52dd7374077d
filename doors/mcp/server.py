"""``/mcp``: the official MCP SDK's Streamable HTTP server, stateless with JSON responses,
behind the REST API's bearer keys.

The SDK serves both protocol eras from one endpoint: the ``initialize`` handshake that most
deployed clients speak, and the per-request revision with ``server/discover`` that the SDK 2.x
client negotiates first. Tool calls run the blocking service functions in worker threads, so a
slow fetch or a ``batch_get`` wait never holds up the event loop.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from functools import cache
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from django.conf import settings
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from batch.errors import Refusal, Refused
from batch.models import ApiKey
from doors.auth import caller_for_key
from doors.mcp import progress, tasks, tools
from doors.middleware import replay, request_body, send_refusal, upload_share
from fetch.outcomes import RetryAfter

PATH = "/mcp"
# The ASGI scope key the key gate leaves the authenticated caller under, for the tools.
CALLER = "sift.caller"
# Tool calls in flight at once, each in its own thread with its own database connection: as many
# as the web process serves (2 gunicorn workers x 8 threads).
THREADS = 16
INSTRUCTIONS = (
    "sift reads the web for you. Use fetch for one URL now; batch_submit then batch_get (with wait) "
    "for many. Errors are results with a code and a hint that says what to do next."
)


# Key lookups have threads of their own: calls held in the THREADS never delay another caller's
# lookup, so a caller is always told at once whether it may come in (or is busy).
KEY_THREADS = 4


@cache
def _limiter() -> anyio.CapacityLimiter:
    # Made on first use, inside the running event loop.
    return anyio.CapacityLimiter(THREADS)


@cache
def _key_limiter() -> anyio.CapacityLimiter:
    return anyio.CapacityLimiter(KEY_THREADS)


async def in_thread(function: Any, *args: Any) -> Any:
    return await anyio.to_thread.run_sync(function, *args, limiter=_limiter())


def _listed() -> list[types.Tool]:
    # Made for each list, so that descriptions and input schemas follow the settings.
    return [tool.as_mcp() for tool in tools.TOOLS.values()]


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=_listed())


def input_schema(name: str) -> dict[str, Any] | None:
    # The SDK checks Mcp-Param-* headers against this on each call of the per-request era;
    # without it, it would run the tools/list handler for every tools/call.
    tool = tools.TOOLS.get(name)
    return tool.input_schema if tool is not None else None


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    tool = tools.TOOLS.get(params.name)
    if tool is None:
        # Asking for a tool that was never listed is protocol misuse, not a tool's refusal.
        raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}; see tools/list")
    caller: ApiKey = ctx.request.scope[CALLER]  # type: ignore[union-attr]
    arguments = params.arguments or {}
    if tool.name == "batch_get" and progress.wants_progress(ctx):
        arguments = await progress.wait_reporting(ctx, caller, tool, arguments)
    outcome = await in_thread(tools.call, tool, caller, arguments)
    return tools.as_result(tool, outcome)


def build_server() -> Server[Any]:
    server: Server[Any] = Server(
        "sift",
        version="1",
        title="sift",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    # The per-request era's server/discover advertises the tasks extension; the middleware serves it.
    server.extensions[tasks.EXTENSION] = {}
    server.middleware.append(tasks.TaskMiddleware(in_thread, CALLER))
    return server


def _streamable(*, json_response: bool) -> Starlette:
    return build_server().streamable_http_app(
        streamable_http_path=PATH,
        json_response=json_response,
        stateless_http=True,
        # The key gate refuses larger bodies first, with the error envelope.
        max_request_body_size=upload_body_limit(),
        # The key gate checks Host against ALLOWED_HOSTS, as Django does for the web process.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def application() -> ASGIApp:
    """The ASGI application of the Procfile's ``mcp`` process (``sift_site/mcp_asgi.py``).

    Answers are JSON, except for a request that asks for progress (a ``progressToken``) from a
    client that accepts an event stream: the SDK drops notifications from JSON answers, so that
    request is served by the same server answering as an event stream."""
    return KeyGate(_streamable(json_response=True), _streamable(json_response=False))


def asks_for_progress(scope: Scope, body: bytes) -> bool:
    """A request whose ``params._meta`` carries a ``progressToken``, from a client that takes streams."""
    if "text/event-stream" not in Headers(scope=scope).get("accept", ""):
        return False
    try:
        message = json.loads(body)
    except ValueError:
        return False
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and meta.get("progressToken") is not None


class InFlight:
    """Requests being served, at most ``SIFT_MCP_PER_CALLER`` per caller and ``SIFT_MCP_TOTAL`` in all.

    Counted on the event loop, which runs one coroutine at a time between awaits; ``hold`` never
    awaits between its check and its count, so it needs no lock. The count is per process, like
    the threads and sockets it protects.
    """

    def __init__(self) -> None:
        self._held: Counter[int] = Counter()

    @contextmanager
    def hold(self, caller_id: int) -> Iterator[None]:
        """Count one request of ``caller_id`` until exit, or raise ``Refused`` busy at once."""
        if self._held[caller_id] >= settings.SIFT_MCP_PER_CALLER:
            raise Refused(
                Refusal.CALLER_BUSY,
                f"you already have {settings.SIFT_MCP_PER_CALLER} MCP requests in flight here",
                "Wait for one of them to answer, or send many URLs as one batch (batch_submit).",
                retry_after=RetryAfter.FETCH,
            )
        if self._held.total() >= settings.SIFT_MCP_TOTAL:
            raise Refused(
                Refusal.SERVER_BUSY,
                "the MCP server is serving as many requests as it may",
                "Send the request again after Retry-After seconds.",
                retry_after=RetryAfter.FETCH,
            )
        self._held[caller_id] += 1
        try:
            yield
        finally:
            self._held[caller_id] -= 1
            if not self._held[caller_id]:
                del self._held[caller_id]


class KeyGate:
    """Only ``/mcp``, only a host in ALLOWED_HOSTS, only with a caller's bearer key, only POST,
    only so many at once, only bodies up to ``SIFT_MAX_REQUEST_BYTES`` (docs/mcp.md).

    Refusals are the REST API's error envelope with its statuses: 404, 400, 401, 403, 405, 429,
    503 and 413, in the order checked. A request holds its place in ``in_flight`` until the SDK
    has answered it whole, however it ends.
    """

    def __init__(self, app: Starlette, streaming: Starlette) -> None:
        self.app = app
        self.streaming = streaming
        self.in_flight = InFlight()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # start (and stop) both apps' SDK session managers
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        try:
            caller = await self._admit(scope)
            with self.in_flight.hold(caller.pk), _large_body_share(scope, caller.pk) as limit:
                body = await request_body(scope, receive, limit=limit)
                if body is not None:  # None: the client went away while sending it
                    app = self.streaming if asks_for_progress(scope, body) else self.app
                    await app({**scope, CALLER: caller}, replay(body, receive), send)
        except Refused as exc:
            # Raised only before the SDK is called, so nothing has been sent yet; a body left
            # unread ends the connection.
            await send_refusal(exc, send, close=exc.code == Refusal.TOO_LARGE)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        async with AsyncExitStack() as running:
            for app in (self.app, self.streaming):
                await running.enter_async_context(app.router.lifespan_context(app))
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})

    async def _admit(self, scope: Scope) -> ApiKey:
        if scope["path"].rstrip("/") != PATH:
            raise Refused(Refusal.NOT_FOUND, "no such path", f"The MCP endpoint is {PATH}.")
        headers = Headers(scope=scope)
        domain, _ = split_domain_port(headers.get("host", ""))
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            raise Refused(
                Refusal.INVALID_REQUEST, "this host is not served here", "Use a host in ALLOWED_HOSTS."
            )
        scheme, _, raw_key = headers.get("authorization", "").partition(" ")
        caller = None
        if scheme.lower() == "bearer" and raw_key.strip():
            caller = await anyio.to_thread.run_sync(_caller_for_key, raw_key.strip(), limiter=_key_limiter())
        if caller is None:
            raise Refused(
                Refusal.UNAUTHORIZED, "missing or unknown API key", "Send Authorization: Bearer <your key>."
            )
        if scope["method"] != "POST":
            # The SDK would open an endless event stream for a GET, even when stateless.
            raise Refused(
                Refusal.METHOD_NOT_ALLOWED,
                f"{scope['method']} is not allowed on {PATH}",
                "POST each JSON-RPC message; this server opens no event streams and keeps no sessions.",
            )
        return caller


def upload_body_limit() -> int:
    """The largest body: a document of ``SIFT_UPLOAD_MAX_BYTES`` in base64 (the tool read), with
    room for the JSON-RPC message around it."""
    return (settings.SIFT_UPLOAD_MAX_BYTES + 2) // 3 * 4 + settings.SIFT_MAX_REQUEST_BYTES


@contextmanager
def _large_body_share(scope: Scope, caller_id: int) -> Iterator[int]:
    """The body limit of this request: ``SIFT_MAX_REQUEST_BYTES``, or an upload's while it holds
    one of the caller's upload shares (a body declared larger, or of no declared length)."""
    declared = Headers(scope=scope).get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) <= settings.SIFT_MAX_REQUEST_BYTES:
        yield settings.SIFT_MAX_REQUEST_BYTES
        return
    with upload_share(caller_id):
        yield upload_body_limit()


def _caller_for_key(raw_key: str) -> ApiKey | None:
    close_old_connections()
    try:
        return caller_for_key(raw_key)
    finally:
        close_old_connections()
