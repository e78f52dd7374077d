"""The outermost ASGI layer of the web and mcp processes: each request's id, and the requests of
each door counted.

A request keeps the caller's ``X-Request-ID`` when it is well formed, or gets a new one; either
way the answer carries it back, and every log line written while it is served (uvicorn's access
line included) names it in JSON (``sift_site/log_lines.py``). Requests to a door, REST (``/v1/``)
or MCP (``/mcp``), are counted by status and timed to their answer's first byte: an event stream
is timed to its opening, not its end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, MutableMapping
from typing import Any

from prometheus_client import Counter, Histogram

from doors.middleware import header_of
from sift_site.log_lines import REQUEST_ID, request_id_from

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Message], Any]

REQUESTS = Counter("sift_requests", "Requests to a door (rest, mcp) by HTTP status", ["door", "code"])
SECONDS = Histogram(
    "sift_request_seconds",
    "Seconds from a door's request to its answer's status line",
    ["door"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, float("inf")),
)


def door(path: str) -> str | None:
    if path.startswith("/v1/"):
        return "rest"
    if path.rstrip("/") == "/mcp":
        return "mcp"
    return None


class RequestEdge:
    """ASGI: the request id, set for the request's context and sent back; the door's count."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_from(header_of(scope, b"x-request-id"))
        counted = door(scope.get("path", ""))
        started = time.monotonic()
        status: list[int] = []

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
                message = {
                    **message,
                    "headers": [*message.get("headers", ()), (b"x-request-id", request_id.encode())],
                }
                if counted:
                    SECONDS.labels(counted).observe(time.monotonic() - started)
                    REQUESTS.labels(counted, str(status[0])).inc()
            await send(message)

        token = REQUEST_ID.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            if counted and not status:  # the server answers 500 for it
                REQUESTS.labels(counted, "500").inc()
            raise
        finally:
            REQUEST_ID.reset(token)
