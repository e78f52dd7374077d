"""Traffic through every door of a deployment (tests/deployment.py): a fetch over REST, a batch job
with a webhook run by the cluster and sent by the webhooks line, and a tool call over MCP; for the
tests that read what a deployment reports afterwards (its /metrics, its log lines)."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any

from .deployment import Deployment, wait_for
from .factories import SCRIPTED_BASE
from .receiver import Receiver

LEGACY_MCP = "2025-11-25"


@dataclass
class Driven:
    """What the traffic left: the job, and the answers' X-Request-ID headers by door."""

    job_id: str
    rest_request_id: str
    mcp_request_id: str


def post(
    port: int, path: str, key: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, Any, Any]:
    """POST ``body`` as JSON; answer (status, headers, JSON body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request(
            "POST",
            path,
            body=json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {key}",
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": LEGACY_MCP,
                **(headers or {}),
            },
        )
        response = connection.getresponse()
        return response.status, response.headers, json.loads(response.read() or b"null")
    finally:
        connection.close()


def drive_every_door(
    deployment: Deployment, key: str, page_url: str, hook: Receiver, request_ids: tuple[str, str]
) -> Driven:
    """A REST fetch of ``page_url`` and an MCP ``fetch`` of it, sent with ``request_ids`` (REST,
    MCP) as X-Request-ID; a batch job of one scripted target whose webhook goes to ``hook``,
    waited for until delivered."""
    status, rest_headers, body = post(
        deployment.port, "/v1/fetch", key, {"url": page_url}, {"X-Request-ID": request_ids[0]}
    )
    assert status == 200, body
    status, _, job = post(
        deployment.port, "/v1/batch", key, {"targets": [SCRIPTED_BASE + "0"], "callback_url": hook.url}
    )
    assert status == 202, job
    wait_for(hook.posts, 90, "the job's webhook")
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "fetch", "arguments": {"url": page_url}},
    }
    status, mcp_headers, answer = post(
        deployment.mcp_port, "/mcp", key, call, {"X-Request-ID": request_ids[1]}
    )
    assert status == 200, answer
    assert not answer["result"].get("isError"), answer
    return Driven(job["id"], rest_headers["X-Request-ID"], mcp_headers["X-Request-ID"])
