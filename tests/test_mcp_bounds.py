"""What ``/mcp`` does not serve, and how much it serves at once: the Procfile's ``mcp`` process
over real HTTP, with the official MCP client and with plain HTTP where a refusal is the point
(docs/mcp.md, docs/security.md)."""

from __future__ import annotations

import http.client
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from batch import jobs
from batch.models import ApiKey, BatchJob

from .deployment import Deployment, wait_for
from .factories import MakeCaller, make_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.mcp]

# Each held call fetches a URL the upstream answers only when the test lets it.
HELD = "/held"
# The largest body of the module's mcp process: a document of SIFT_UPLOAD_MAX_BYTES (set small
# below) in base64, for the tool read, beside a request body's 128 KiB.
UPLOAD_MAX_BYTES = 48 * 1024
MAX_BODY = (UPLOAD_MAX_BYTES + 2) // 3 * 4 + 128 * 1024
STREAM_ACCEPT = {"Accept": "application/json, text/event-stream"}
JSON_HEADERS = {"Content-Type": "application/json", **STREAM_ACCEPT}
MODERN = "2026-07-28"
METHOD_NOT_FOUND = -32601


class _HeldServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _HeldHandler)
        self.released = threading.Event()
        self.arrived = 0
        self.lock = threading.Lock()


class _HeldHandler(BaseHTTPRequestHandler):
    server: _HeldServer

    def do_GET(self) -> None:
        if self.path.startswith(HELD):
            with self.server.lock:
                self.server.arrived += 1
            self.server.released.wait(60)
        body = f"page {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def held_upstream() -> Iterator[_HeldServer]:
    """Pages on 127.0.0.1: under ``/held`` answered only once ``released`` is set, others at once."""
    server = _HeldServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.released.set()
        server.shutdown()
        server.server_close()


def page(server: _HeldServer, path: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def deployment_in(tmp_path: Path, **env: str) -> Deployment:
    return Deployment(
        tmp_path,
        # A caller's fetch shares are not the bound under test: let every held call fetch.
        {
            "SIFT_FETCH_ALLOW_CIDRS": "127.0.0.1/32",
            "SIFT_FETCH_PER_CALLER": "16",
            "SIFT_UPLOAD_MAX_BYTES": str(UPLOAD_MAX_BYTES),
            **env,
        },
    )


@pytest.fixture(scope="module")
def mcp(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[tuple[Deployment, str]]:
    """One ``mcp`` process with the default bounds for the module; it reads keys per request."""
    with django_db_blocker.unblock():
        deployment = deployment_in(tmp_path_factory.mktemp("mcp"))
    try:
        yield deployment, deployment.start_mcp()
    finally:
        deployment.stop_all()


def call(url: str, key: str, tool: str, arguments: dict[str, Any]) -> Any:
    """One tool call through the official SDK client, in its default era."""

    async def main() -> Any:
        headers = {"Authorization": f"Bearer {key}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60)) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            return await client.call_tool(tool, arguments)

    return anyio.run(main)


def request(
    url: str,
    method: str,
    key: str | None,
    body: bytes | Iterator[bytes] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30,
) -> tuple[int, http.client.HTTPMessage, bytes]:
    """One request on a connection of its own; the body is read to its end (or the timeout)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    headers = dict(headers or {})
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    try:
        connection.request(method, parts.path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def fetch_in_threads(url: str, fetches: list[tuple[str, str]]) -> tuple[list[threading.Thread], list[Any]]:
    """Start one thread per (key, page) calling ``fetch``; answer the threads and their results."""
    results: list[Any] = []

    def fetch(key: str, target: str) -> None:
        results.append(call(url, key, "fetch", {"url": target}))

    threads = [threading.Thread(target=fetch, args=fetch_args) for fetch_args in fetches]
    for thread in threads:
        thread.start()
    return threads, results


def tool_message(name: str, arguments: dict[str, Any]) -> bytes:
    """A ``tools/call`` in the handshake era's stateless form, which needs no ``initialize`` first."""
    params = {"name": name, "arguments": arguments}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()


def tool_call(url: str, key: str | None, name: str, arguments: dict[str, Any]) -> tuple[int, Any, Any]:
    """A tool call as a plain POST; the body as JSON."""
    status, headers, body = request(url, "POST", key, tool_message(name, arguments), JSON_HEADERS)
    return status, headers, json.loads(body)


def open_descriptors(deployment: Deployment) -> int:
    return len(os.listdir(f"/proc/{deployment.processes['mcp'].pid}/fd"))


def assert_envelope(headers: http.client.HTTPMessage, body: Any, code: str) -> None:
    assert headers["Content-Type"] == "application/json"
    assert body["code"] == code
    assert body["error"]
    assert body["hint"]


def test_get_delete_and_other_methods_answer_405_with_the_envelope_and_leave_no_stream_open(mcp, agent):
    deployment, url = mcp
    _, client = agent
    for method in ("GET", "DELETE", "PUT", "PATCH"):
        # Read to the end: an event stream would never end, and the read would time out.
        status, headers, body = request(url, method, client.raw_key, headers=STREAM_ACCEPT, timeout=10)
        assert status == 405, (method, headers, body[:200])
        assert headers["Allow"] == "POST"
        assert_envelope(headers, json.loads(body), "method_not_allowed")
    before = open_descriptors(deployment)
    for _ in range(50):
        assert request(url, "GET", client.raw_key, headers=STREAM_ACCEPT, timeout=10)[0] == 405
    # Every connection is closed again: nothing is left open on the server's side.
    wait_for(lambda: open_descriptors(deployment) <= before + 5, what="the GETs' sockets to close")
    # Without a key the answer stays 401: a method is judged only for a caller.
    status, _, body = request(url, "GET", None, timeout=10)
    assert (status, json.loads(body)["code"]) == (401, "unauthorized")


def test_a_post_asking_for_a_notification_stream_is_answered_at_once_in_json(mcp, agent):
    _, url = mcp
    _, client = agent
    params = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "http.client", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        },
        "notifications": {"toolsListChanged": True},
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params}
    sent = {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen"}
    status, headers, body = request(
        url, "POST", client.raw_key, json.dumps(message).encode(), sent, timeout=10
    )
    assert headers["Content-Type"] == "application/json"
    assert (status, json.loads(body)["error"]["code"]) == (404, METHOD_NOT_FOUND)


def test_a_fifth_call_in_flight_from_one_caller_is_refused_busy_while_another_caller_is_served(
    mcp, make_caller: MakeCaller
):
    _, url = mcp
    _, alice = make_caller("alice")
    _, bob = make_caller("bob")
    with held_upstream() as upstream:
        holders, results = fetch_in_threads(
            url, [(alice.raw_key, page(upstream, f"{HELD}/{i}")) for i in range(4)]
        )
        wait_for(lambda: upstream.arrived == 4, what="alice's four calls to reach the upstream")

        status, headers, body = tool_call(url, alice.raw_key, "fetch", {"url": page(upstream, "/fast")})
        assert status == 429
        assert_envelope(headers, body, "caller_busy")
        assert int(headers["Retry-After"]) == body["retry_after"] >= 1
        # Counted after authentication: an unknown key is still told so.
        assert tool_call(url, "sk_unknown", "batch_list", {})[0] == 401
        served = call(url, bob.raw_key, "fetch", {"url": page(upstream, "/fast")})
        assert not served.is_error, served
        assert served.structured_content["content"] == "page /fast"

        upstream.released.set()
        for holder in holders:
            holder.join(60)
        assert len(results) == 4
        assert not any(result.is_error for result in results), results
        # The four places are given back.
        again = call(url, alice.raw_key, "fetch", {"url": page(upstream, "/again")})
        assert not again.is_error, again


def test_calls_whose_client_went_away_give_their_places_back_when_their_work_ends(
    mcp, make_caller: MakeCaller
):
    _, url = mcp
    _, alice = make_caller("alice")
    parts = urlsplit(url)
    with held_upstream() as upstream:
        connections = []
        for i in range(4):
            connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
            connection.request(
                "POST",
                parts.path,
                body=tool_message("fetch", {"url": page(upstream, f"{HELD}/{i}")}),
                headers={"Authorization": f"Bearer {alice.raw_key}", **JSON_HEADERS},
            )
            connections.append(connection)
        wait_for(lambda: upstream.arrived == 4, what="alice's four calls to reach the upstream")
        for connection in connections:
            connection.close()
        # A call goes on in its thread after its client has gone, and keeps its place meanwhile.
        assert tool_call(url, alice.raw_key, "batch_list", {})[0] == 429
        upstream.released.set()
        wait_for(
            lambda: tool_call(url, alice.raw_key, "batch_list", {})[0] == 200,
            what="alice's places to be given back",
        )


def test_one_call_beyond_the_total_in_flight_is_refused_503_with_retry_after(
    tmp_path, make_caller: MakeCaller
):
    callers = [make_caller(name)[1] for name in ("alice", "bob", "carol")]
    deployment = deployment_in(tmp_path, SIFT_MCP_TOTAL="2")
    with held_upstream() as upstream:
        try:
            url = deployment.start_mcp()
            held = [(caller.raw_key, page(upstream, f"{HELD}/{i}")) for i, caller in enumerate(callers[:2])]
            holders, results = fetch_in_threads(url, held)
            wait_for(lambda: upstream.arrived == 2, what="two callers' calls to reach the upstream")

            status, headers, body = tool_call(url, callers[2].raw_key, "batch_list", {})
            assert status == 503
            assert_envelope(headers, body, "server_busy")
            assert int(headers["Retry-After"]) == body["retry_after"] >= 1
            assert tool_call(url, "sk_unknown", "batch_list", {})[0] == 401

            upstream.released.set()
            for holder in holders:
                holder.join(60)
            assert len(results) == 2
            assert not any(result.is_error for result in results), results
            listed = call(url, callers[2].raw_key, "batch_list", {})
            assert not listed.is_error, listed
        finally:
            deployment.stop_all()


def test_a_body_over_the_limit_is_413_with_the_envelope_declared_or_streamed(mcp, agent):
    _, url = mcp
    _, client = agent
    too_large = b"[" + b" " * MAX_BODY + b"]"
    status, headers, body = request(url, "POST", client.raw_key, too_large, JSON_HEADERS)
    assert status == 413
    assert_envelope(headers, json.loads(body), "too_large")
    # Sent in chunks, with no Content-Length to judge it by beforehand.
    chunks = iter([too_large[: MAX_BODY // 2], too_large[MAX_BODY // 2 :]])
    status, headers, body = request(url, "POST", client.raw_key, chunks, JSON_HEADERS)
    assert status == 413
    assert_envelope(headers, json.loads(body), "too_large")
    # Only a caller's body is read: without a key it is 401 before that.
    status, _, body = request(url, "POST", None, too_large, JSON_HEADERS)
    assert (status, json.loads(body)["code"]) == (401, "unauthorized")


def rpc_message(method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


HANDSHAKE_ERA = {**JSON_HEADERS, "MCP-Protocol-Version": "2025-11-25"}


def test_held_task_results_hold_no_thread_and_another_key_is_served_at_once(mcp, make_caller: MakeCaller):
    _, url = mcp
    keys = [make_caller(f"waiter-{n}")[1].raw_key for n in range(4)]
    job_ids = [make_job(ApiKey.objects.get(name=f"waiter-{n}"), "queued").id for n in range(4)]
    answers: list[tuple[str, dict[str, Any]]] = []

    def post(key: str, method: str, params: dict[str, Any]) -> tuple[int, Any]:
        status, _, body = request(url, "POST", key, rpc_message(method, params), HANDSHAKE_ERA, timeout=60)
        return status, json.loads(body)

    def task_result(key: str, job_id: str) -> None:
        answers.append((job_id, post(key, "tasks/result", {"taskId": job_id})[1]))

    # Four keys, four calls each (no cluster runs: the jobs wait), as many as the process has
    # threads for tool calls.
    held = [
        threading.Thread(target=task_result, args=(key, job_id))
        for key, job_id in zip(keys, job_ids, strict=True)
        for _ in range(4)
    ]
    for thread in held:
        thread.start()
    try:
        # Every waiting key holds its four calls: a fifth is refused busy at once.
        for key in keys:

            def busy(key: str = key) -> bool:
                return post(key, "tools/list", {})[0] == 429

            wait_for(busy, what="four held calls of a key")
        _, fifth = make_caller("fifth")
        status, body = post(fifth.raw_key, "tools/list", {})
        assert status == 200
        assert {tool["name"] for tool in body["result"]["tools"]} >= {"fetch", "batch_get"}
        assert answers == []
    finally:
        for job_id in job_ids:  # each task ends: its held results answer
            jobs.cancel(BatchJob.objects.get(pk=job_id))
        for thread in held:
            thread.join(30)
    assert len(answers) == 16
    for job_id, answer in answers:
        assert answer["result"]["structuredContent"]["status"] == "cancelled"
        assert answer["result"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": job_id}
