"""MCP tasks backed by batch jobs, in raw JSON-RPC over HTTP against the Procfile's ``mcp`` process
and a real cluster: the handshake era's core tasks and the per-request era's tasks extension
(docs/mcp.md)."""

from __future__ import annotations

import http.client
import itertools
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from batch.models import BatchJob

from .deployment import Deployment, wait_for
from .factories import SCRIPTED_BASE, MakeCaller

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.mcp]

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
EXTENSION = "io.modelcontextprotocol/tasks"
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
MISSING_CAPABILITY = -32021
names = itertools.count()


@pytest.fixture(scope="module")
def deployment(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Deployment]:
    """One ``mcp`` process for the module; it reads the test database."""
    with django_db_blocker.unblock():
        deployment = Deployment(tmp_path_factory.mktemp("mcp-tasks"), {})
    try:
        deployment.start_mcp()
        yield deployment
    finally:
        deployment.stop_all()


@pytest.fixture
def mcp(deployment: Deployment) -> Iterator[str]:
    """The mcp endpoint, with a cluster for one test, stopped before the tables are emptied (its
    webhook thread polls all the time, and emptying the tables under it can deadlock)."""
    deployment.start_cluster("cluster")
    try:
        yield f"http://127.0.0.1:{deployment.mcp_port}/mcp"
    finally:
        deployment.stop("cluster")


def rpc(url: str, key: str, method: str, params: dict[str, Any], *, modern: bool = False) -> dict[str, Any]:
    """One JSON-RPC request as a plain POST; the whole JSON-RPC answer."""
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    if modern:
        headers |= {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        name = params.get("taskId", params.get("name"))
        if name is not None:
            headers["Mcp-Name"] = name
    else:
        headers["MCP-Protocol-Version"] = LEGACY
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        connection.request("POST", parts.path, body=body, headers=headers)
        response = connection.getresponse()
        answer: dict[str, Any] = json.loads(response.read())
        return answer
    finally:
        connection.close()


def modern_meta(*, tasks: bool = True) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "http.client", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}} if tasks else {},
    }


def modern_rpc(
    url: str, key: str, method: str, params: dict[str, Any], *, tasks: bool = True
) -> dict[str, Any]:
    return rpc(url, key, method, {**params, "_meta": modern_meta(tasks=tasks)}, modern=True)


def caller(make_caller: MakeCaller) -> str:
    return make_caller(f"tasks-{next(names)}")[1].raw_key


def targets(*queries: str) -> list[str]:
    return [f"{SCRIPTED_BASE}{i}" + (f"?{query}" if query else "") for i, query in enumerate(queries)]


def test_the_handshake_era_advertises_tasks_for_batch_submit_only(mcp, make_caller):
    key = caller(make_caller)
    client = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    initialized = rpc(mcp, key, "initialize", client)["result"]
    assert initialized["capabilities"]["tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    listed = rpc(mcp, key, "tools/list", {})["result"]["tools"]
    support = {tool["name"]: tool["execution"]["taskSupport"] for tool in listed}
    assert support["batch_submit"] == "optional"
    assert support["batch_get"] == support["fetch"] == "forbidden"
    refused = rpc(mcp, key, "tools/call", {"name": "batch_list", "arguments": {}, "task": {}})
    assert refused["error"]["code"] == METHOD_NOT_FOUND


def test_a_task_of_batch_submit_is_the_job_read_listed_and_its_result_the_batch_get_shape(mcp, make_caller):
    key, other = caller(make_caller), caller(make_caller)
    call = {
        "name": "batch_submit",
        "arguments": {"targets": targets("sleep=0.3", "")},
        "task": {"ttl": 60000},
    }
    created = rpc(mcp, key, "tools/call", call)["result"]["task"]
    job = BatchJob.objects.get(pk=created["taskId"])
    assert created["status"] == "working"
    assert created["ttl"] > 0
    assert created["pollInterval"] > 0

    answer = rpc(mcp, key, "tasks/result", {"taskId": job.id})["result"]
    assert answer["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": job.id}
    body = answer["structuredContent"]
    assert (body["id"], body["status"], body["targets_done"]) == (job.id, "done", 2)
    assert json.loads(answer["content"][0]["text"]) == body
    assert [t["result"]["content"] for t in body["targets"]] == [
        f"content of {t}" for t in targets("sleep=0.3", "")
    ]

    got = rpc(mcp, key, "tasks/get", {"taskId": job.id})["result"]
    assert (got["taskId"], got["status"]) == (job.id, "completed")
    listed = rpc(mcp, key, "tasks/list", {})["result"]["tasks"]
    assert [t["taskId"] for t in listed] == [job.id]
    refused = rpc(mcp, key, "tasks/cancel", {"taskId": job.id})
    assert refused["error"]["code"] == INVALID_PARAMS

    # Another caller's task is as unknown as a missing one, for every method.
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        assert rpc(mcp, other, method, {"taskId": job.id})["error"]["code"] == INVALID_PARAMS
    assert rpc(mcp, other, "tasks/list", {})["result"]["tasks"] == []


def test_tasks_cancel_cancels_the_job_and_a_refused_submit_is_a_tool_error(mcp, make_caller):
    key = caller(make_caller)
    call = {"name": "batch_submit", "arguments": {"targets": targets("sleep=30")}, "task": {}}
    task_id = rpc(mcp, key, "tools/call", call)["result"]["task"]["taskId"]
    # One live job per caller: a second is refused as batch_submit refuses it, not as a task.
    busy = rpc(mcp, key, "tools/call", {**call, "arguments": {"targets": targets("")}})["result"]
    assert busy["isError"] is True
    assert busy["structuredContent"]["code"] == "caller_busy"

    cancelled = rpc(mcp, key, "tasks/cancel", {"taskId": task_id})["result"]
    assert (cancelled["taskId"], cancelled["status"]) == (task_id, "cancelled")
    assert BatchJob.objects.get(pk=task_id).status == "cancelled"
    assert rpc(mcp, key, "tasks/get", {"taskId": task_id})["result"]["status"] == "cancelled"
    assert rpc(mcp, key, "tasks/get", {"taskId": "nope"})["error"]["code"] == INVALID_PARAMS


def test_the_extension_era_answers_batch_submit_with_a_task_the_client_polls(mcp, make_caller):
    key, other = caller(make_caller), caller(make_caller)
    discovered = modern_rpc(mcp, key, "server/discover", {})["result"]
    assert discovered["capabilities"]["extensions"][EXTENSION] == {}

    call = {"name": "batch_submit", "arguments": {"targets": targets("sleep=0.3", "")}}
    created = modern_rpc(mcp, key, "tools/call", call)["result"]
    assert (created["resultType"], created["status"]) == ("task", "working")
    task_id = created["taskId"]
    assert created["ttlMs"] > 0
    assert created["pollIntervalMs"] > 0

    def completed() -> dict[str, Any] | None:
        got: dict[str, Any] = modern_rpc(mcp, key, "tasks/get", {"taskId": task_id})["result"]
        return got if got["status"] == "completed" else None

    wait_for(lambda: completed() is not None, timeout=60, what="the task to complete")
    got = completed()
    assert got is not None
    assert got["resultType"] == "complete"
    assert got["result"]["structuredContent"]["status"] == "done"
    assert got["result"]["structuredContent"]["targets_done"] == 2

    update = {"taskId": task_id, "inputResponses": {}}
    assert modern_rpc(mcp, key, "tasks/update", update)["result"]["resultType"] == "complete"
    assert modern_rpc(mcp, key, "tasks/cancel", {"taskId": task_id})["result"]["resultType"] == "complete"
    assert BatchJob.objects.get(pk=task_id).status == "done"  # it had finished: nothing to cancel

    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        params = (
            {"taskId": task_id, "inputResponses": {}} if method == "tasks/update" else {"taskId": task_id}
        )
        assert modern_rpc(mcp, other, method, params)["error"]["code"] == INVALID_PARAMS
        undeclared = modern_rpc(mcp, key, method, params, tasks=False)["error"]
        assert undeclared["code"] == MISSING_CAPABILITY
        assert undeclared["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    # The extension has no tasks/list or tasks/result.
    assert modern_rpc(mcp, key, "tasks/list", {})["error"]["code"] == METHOD_NOT_FOUND
    assert modern_rpc(mcp, key, "tasks/result", {"taskId": task_id})["error"]["code"] == METHOD_NOT_FOUND


def test_the_extension_era_cancels_and_answers_plainly_to_a_client_without_the_extension(mcp, make_caller):
    key = caller(make_caller)
    call = {"name": "batch_submit", "arguments": {"targets": targets("sleep=30")}}
    task_id = modern_rpc(mcp, key, "tools/call", call)["result"]["taskId"]
    assert modern_rpc(mcp, key, "tasks/cancel", {"taskId": task_id})["result"]["resultType"] == "complete"
    got = modern_rpc(mcp, key, "tasks/get", {"taskId": task_id})["result"]
    assert got["status"] == "cancelled"
    assert "result" not in got

    plain = modern_rpc(mcp, key, "tools/call", {**call, "arguments": {"targets": targets("")}}, tasks=False)
    result = plain["result"]
    assert result["resultType"] == "complete"
    assert "taskId" not in result
    assert result["structuredContent"]["status"] in ("queued", "running", "done")


def test_a_job_whose_every_target_failed_is_a_failed_task_then_a_completed_tool_result(mcp, make_caller):
    key = caller(make_caller)
    call = {"name": "batch_submit", "arguments": {"targets": targets("fail=timeout")}}
    task_id = modern_rpc(mcp, key, "tools/call", call)["result"]["taskId"]

    # The handshake era's tasks/result waits for the end and answers the job as batch_get does.
    answer = rpc(mcp, key, "tasks/result", {"taskId": task_id})["result"]
    assert answer["structuredContent"]["status"] == "failed"
    assert answer["structuredContent"]["targets"][0]["outcome"] == "timeout"
    assert rpc(mcp, key, "tasks/get", {"taskId": task_id})["result"]["status"] == "failed"

    # The extension keeps "failed" for JSON-RPC errors: a failed job is a completed tool call.
    got = modern_rpc(mcp, key, "tasks/get", {"taskId": task_id})["result"]
    assert got["status"] == "completed"
    assert got["result"]["structuredContent"]["status"] == "failed"
    assert got["result"]["structuredContent"]["targets"][0]["outcome"] == "timeout"
    assert got["statusMessage"].startswith("job failed: 1 of 1 targets ended, 1 failed")


@pytest.mark.parametrize(
    "cursor",
    ["²", "9" * 5000, str(2**70), str(2**31), "-1", "1.0", "", 20, None, ["20"]],
    ids=[
        "superscript", "5000-digits", "2^70", "2^31", "negative", "decimal", "empty", "number", "null",
        "list",
    ],
)  # fmt: skip
def test_a_tasks_list_cursor_this_server_never_gave_is_invalid_params_with_a_hint(
    deployment, make_caller, cursor
):
    key = caller(make_caller)
    url = f"http://127.0.0.1:{deployment.mcp_port}/mcp"
    answer = rpc(url, key, "tasks/list", {"cursor": cursor})
    if cursor is None:  # no cursor: the first page
        assert answer["result"]["tasks"] == []
        return
    error = answer["error"]
    assert error["code"] == INVALID_PARAMS
    assert error["message"].startswith("cursor:")
    assert "nextCursor" in error["data"]
