"""MCP tasks backed by batch jobs: a task-augmented ``batch_submit`` answers the job as a task whose
id is the job's id, and the ``tasks/*`` methods read, list and cancel the caller's jobs.

Both protocol eras are served by one ``Server.middleware`` entry, because the SDK has no task
support of its own: its handshake-era tables leave ``tasks/*`` out and its result check refuses a
``CreateTaskResult``. The handshake era (2025-11-25) gets the core tasks: the ``task`` parameter
on ``tools/call``, ``tasks/get``, ``tasks/result``, ``tasks/cancel`` and ``tasks/list``. The
per-request era gets the tasks extension (``io.modelcontextprotocol/tasks``): ``batch_submit``
answers a task when the request declares the extension, then ``tasks/get``, ``tasks/update`` and
``tasks/cancel``. Every method goes through the jobs service, so another caller's task is as
unknown as a missing one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from batch import jobs
from batch.errors import Refused
from batch.models import MAX_DB_INT, ApiKey, BatchJob, JobStatus
from doors.mcp import progress, tools

EXTENSION = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
RELATED_TASK = "io.modelcontextprotocol/related-task"
MISSING_CAPABILITY = -32021
# What the handshake era's initialize advertises: task-augmented tools/call, tasks/list and tasks/cancel.
CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
TASK_TOOL = "batch_submit"
POLL_MS = 2000
PAGE = 20
STATUSES = {
    JobStatus.QUEUED: "working",
    JobStatus.RUNNING: "working",
    JobStatus.DONE: "completed",
    JobStatus.PARTIAL: "completed",
    JobStatus.FAILED: "failed",
    JobStatus.CANCELLED: "cancelled",
}
HANDSHAKE_METHODS = ("tasks/get", "tasks/result", "tasks/cancel", "tasks/list")
EXTENSION_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")

InThread = Callable[..., Awaitable[Any]]


def task(job: BatchJob, *, modern: bool) -> dict[str, Any]:
    """The job as a task: its id, its status mapped, its times, and how long it is kept."""
    updated = job.finished_at or job.created_at
    ttl = settings.SIFT_BATCH_TTL * 1000
    status = STATUSES[JobStatus(job.status)]
    if modern and status == "failed":
        # The extension keeps "failed" for JSON-RPC errors; a failed job is a tool result.
        status = "completed"
    shaped: dict[str, Any] = {
        "taskId": job.id,
        "status": status,
        "statusMessage": _message(job),
        "createdAt": job.created_at.isoformat(),
        "lastUpdatedAt": updated.isoformat(),
    }
    if modern:
        return {**shaped, "ttlMs": ttl, "pollIntervalMs": POLL_MS}
    return {**shaped, "ttl": ttl, "pollInterval": POLL_MS}


def _message(job: BatchJob) -> str:
    # targets_done counts every target that ended, the failed ones among them.
    message = (
        f"job {job.status}: {job.targets_done} of {job.targets_total} targets ended, "
        f"{job.targets_failed} failed"
    )
    return f"{message}; {job.error}" if job.error else message


def _not_found(task_id: Any) -> MCPError:
    return MCPError(
        INVALID_PARAMS,
        f"Failed to retrieve task: no task {task_id!r}",
        "Check the taskId; tasks are the caller's batch jobs, deleted after their TTL.",
    )


def _job(caller: ApiKey, params: Mapping[str, Any]) -> BatchJob:
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise MCPError(INVALID_PARAMS, "taskId: a task id (string) is required")
    try:
        return jobs.get_job(caller, task_id)
    except Refused:
        raise _not_found(task_id) from None


def _fresh(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` run with a fresh view of the database, in a worker thread."""

    def run(*args: Any) -> Any:
        close_old_connections()
        try:
            return function(*args)
        finally:
            close_old_connections()

    return run


@_fresh
def submit(caller: ApiKey, arguments: dict[str, Any], modern: bool) -> dict[str, Any]:
    """A ``CreateTaskResult`` for a new (or reused) job, or the tool's error result when refused."""
    tool = tools.TOOLS[TASK_TOOL]
    outcome = tools.call(tool, caller, arguments)
    if not outcome.ok:
        return tools.as_result(tool, outcome).model_dump(by_alias=True, mode="json", exclude_none=True)
    created = task(jobs.get_job(caller, outcome.body["id"]), modern=modern)
    return {"resultType": "task", **created} if modern else {"task": created}


def _job_result(caller: ApiKey, job_id: str, wait: float) -> dict[str, Any]:
    """The job as ``batch_get`` answers it, as a ``CallToolResult``."""
    tool = tools.TOOLS["batch_get"]
    outcome = tools.call(tool, caller, {"id": job_id, "wait": wait})
    if not outcome.ok:  # swept or evicted since it was read
        raise _not_found(job_id)
    result: dict[str, Any] = tools.as_result(tool, outcome).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )
    return result


@_fresh
def get(caller: ApiKey, params: Mapping[str, Any], modern: bool) -> dict[str, Any]:
    job = _job(caller, params)
    shaped = task(job, modern=modern)
    if not modern:
        return shaped
    if shaped["status"] == "completed":
        shaped["result"] = _job_result(caller, job.id, 0)
    return {"resultType": "complete", **shaped}


@_fresh
def found(caller: ApiKey, params: Mapping[str, Any], modern: bool) -> str:
    """The id of the caller's task named in ``params`` (its job touched), or ``_not_found``."""
    return _job(caller, params).id


@_fresh
def result_now(caller: ApiKey, job_id: str) -> dict[str, Any]:
    """The ended job's results as ``batch_get`` answers them, marked as the task's."""
    answer = _job_result(caller, job_id, 0)
    answer["_meta"] = {RELATED_TASK: {"taskId": job_id}}
    return answer


async def result(in_thread: InThread, caller: ApiKey, params: Mapping[str, Any]) -> dict[str, Any]:
    """``tasks/result``: the job's results once it has ended. The tasks spec has it block until
    then; the wait is on the event loop (``progress.until_ended``), so however many calls wait,
    no thread is held and other callers' calls are served. ``SIFT_MCP_PER_CALLER`` bounds the
    calls a caller holds."""
    job_id = await in_thread(found, caller, params, False)
    await progress.until_ended(caller, job_id)
    answer: dict[str, Any] = await in_thread(result_now, caller, job_id)
    return answer


@_fresh
def cancel(caller: ApiKey, params: Mapping[str, Any], modern: bool) -> dict[str, Any]:
    job = _job(caller, params)
    if job.is_live:
        jobs.cancel(job)
        job.refresh_from_db()
    elif not modern:
        raise MCPError(
            INVALID_PARAMS, f"Cannot cancel task {job.id}: it is already {STATUSES[JobStatus(job.status)]}"
        )
    return {"resultType": "complete"} if modern else task(job, modern=False)


@_fresh
def update(caller: ApiKey, params: Mapping[str, Any], modern: bool) -> dict[str, Any]:
    """Acknowledged for a known task: these tasks never ask for input, so responses are ignored."""
    _job(caller, params)
    return {"resultType": "complete"}


@_fresh
def listed(caller: ApiKey, params: Mapping[str, Any], modern: bool) -> dict[str, Any]:
    offset = _offset(params.get("cursor"))
    page, count = jobs.list_jobs(caller, limit=PAGE, offset=offset)
    answer: dict[str, Any] = {"tasks": [task(job, modern=False) for job in page]}
    if offset + len(page) < count:
        answer["nextCursor"] = str(offset + len(page))
    return answer


def _offset(cursor: Any) -> int:
    """The offset a ``nextCursor`` stands for; ``INVALID_PARAMS`` with a hint for anything else
    (a number's length is checked before ``int()``, which refuses more digits than Python's limit)."""
    if cursor is None:
        return 0
    if (
        isinstance(cursor, str)
        and cursor.isascii()
        and cursor.isdigit()
        and len(cursor) <= len(str(MAX_DB_INT))
        and int(cursor) <= MAX_DB_INT
    ):
        return int(cursor)
    raise MCPError(
        INVALID_PARAMS,
        "cursor: not a cursor this server gave",
        "Pass back the nextCursor of the previous page as it came, or no cursor for the first page.",
    )


SERVED = {"tasks/get": get, "tasks/cancel": cancel, "tasks/update": update, "tasks/list": listed}


def declares_extension(params: Mapping[str, Any] | None) -> bool:
    meta = (params or {}).get("_meta")
    capabilities = meta.get(CLIENT_CAPABILITIES) if isinstance(meta, Mapping) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def _missing_capability() -> MCPError:
    return MCPError(
        MISSING_CAPABILITY,
        "Missing required client capability",
        {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


class TaskMiddleware:
    """Serves the task methods and task-augmented ``batch_submit`` calls before the SDK looks."""

    def __init__(self, in_thread: InThread, caller_key: str) -> None:
        self.in_thread = in_thread
        self.caller_key = caller_key

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        method, params = ctx.method, ctx.params or {}
        if not isinstance(params, Mapping):
            return await call_next(ctx)  # the SDK refuses it
        if not modern and method == "initialize":
            answer = await call_next(ctx)
            if isinstance(answer, dict) and isinstance(answer.get("capabilities"), dict):
                answer["capabilities"]["tasks"] = CAPABILITY
            return answer
        if method == "tools/call" and self._augmented(params, modern):
            if params.get("name") != TASK_TOOL:
                raise MCPError(
                    METHOD_NOT_FOUND, f"only {TASK_TOOL} runs as a task; call this tool without task"
                )
            arguments = params.get("arguments") or {}
            if not isinstance(arguments, dict):
                raise MCPError(INVALID_PARAMS, "arguments: an object is required")
            return await self.in_thread(submit, self._caller(ctx), arguments, modern)
        if method in (EXTENSION_METHODS if modern else HANDSHAKE_METHODS):
            if modern and not declares_extension(params):
                raise _missing_capability()
            if method == "tasks/result":
                return await result(self.in_thread, self._caller(ctx), params)
            return await self.in_thread(SERVED[method], self._caller(ctx), params, modern)
        return await call_next(ctx)

    @staticmethod
    def _augmented(params: Mapping[str, Any], modern: bool) -> bool:
        if modern:
            return params.get("name") == TASK_TOOL and declares_extension(params)
        return isinstance(params.get("task"), dict)

    def _caller(self, ctx: ServerRequestContext[Any, Any]) -> ApiKey:
        caller: ApiKey = ctx.request.scope[self.caller_key]  # type: ignore[union-attr]
        return caller
