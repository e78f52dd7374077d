"""``/mcp``: the official MCP SDK's Streamable HTTP server, stateless with JSON responses,
behind the REST API's bearer keys.

The SDK serves both protocol eras from one endpoint: the ``initialize`` handshake that most
deployed clients speak, and the per-request revision with ``server/discover`` that the SDK 2.x
client negotiates first. Tool calls run the blocking service functions in worker threads, so a
slow fetch or a ``batch_get`` wait never holds up the event loop.
"""

from __future__ import annotations

import json
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
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from batch.api.auth import caller_for_key
from batch.errors import Refusal, Refused
from batch.mcp import tools
from batch.models import ApiKey

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


@cache
def _limiter() -> anyio.CapacityLimiter:
    # Made on first use, inside the running event loop.
    return anyio.CapacityLimiter(THREADS)


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
    outcome = await in_thread(tools.call, tool, caller, params.arguments or {})
    return tools.as_result(tool, outcome)


def build_server() -> Server[Any]:
    return Server(
        "sift",
        version="1",
        title="sift",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def application() -> ASGIApp:
    """The ASGI application of the Procfile's ``mcp`` process (``sift_site/mcp_asgi.py``)."""
    streamable = build_server().streamable_http_app(
        streamable_http_path=PATH,
        json_response=True,
        stateless_http=True,
        max_request_body_size=settings.SIFT_MAX_REQUEST_BYTES,
        # The key gate checks Host against ALLOWED_HOSTS, as Django does for the web process.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return KeyGate(streamable)


class KeyGate:
    """Only ``/mcp``, only a host in ALLOWED_HOSTS, only with a caller's bearer key (docs/mcp.md).

    Refusals are the REST API's error envelope with its statuses: 404, 400, 401 and 403.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan messages that start the SDK's session manager
            await self.app(scope, receive, send)
            return
        try:
            caller = await self._admit(scope)
        except Refused as exc:
            await _refuse(exc, send)
            return
        await self.app({**scope, CALLER: caller}, receive, send)

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
            caller = await in_thread(_caller_for_key, raw_key.strip())
        if caller is None:
            raise Refused(
                Refusal.UNAUTHORIZED, "missing or unknown API key", "Send Authorization: Bearer <your key>."
            )
        return caller


def _caller_for_key(raw_key: str) -> ApiKey | None:
    close_old_connections()
    try:
        return caller_for_key(raw_key)
    finally:
        close_old_connections()


async def _refuse(exc: Refused, send: Send) -> None:
    body = json.dumps({"error": exc.message, "code": exc.code, "hint": exc.hint}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if exc.code in (Refusal.UNAUTHORIZED, Refusal.FORBIDDEN):
        headers.append((b"www-authenticate", b'Bearer realm="sift"'))
    await send({"type": "http.response.start", "status": exc.http_status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
