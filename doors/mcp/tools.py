"""The MCP tools: each one calls the functions the REST API calls, and answers what it answers.

A tool checks its arguments (``check_arguments``: a target's or a map's through the REST API's
own validation, the others through their model in ``doors.mcp.inputs``), then takes a caller and
the checked arguments and returns a JSON object shaped by the REST API's own response schemas, or
raises the REST API's errors (``Refused``, ``FetchError``). There is no second path: validation,
caps, the guard, the gate and the cache are the ones ``/v1`` uses.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

import mcp_types as types
from django.db import close_old_connections
from ninja import Schema
from pydantic import ValidationError

from batch import jobs, metrics
from batch.errors import Refusal, Refused
from batch.models import ApiKey
from batch.summaries import job_summary
from doors.auth import ensure_batch_enabled
from doors.callbacks import validate_callback_url
from doors.direct import fetch_for, map_for, read_for
from doors.errors import fetch_error_body, refusal_body
from doors.idempotency import validate_idempotency_key
from doors.mcp import inputs, monitor_tools, read_tool
from doors.mcp.inputs import ARGUMENTS_HINT
from doors.rest.envelope import FetchEnvelope
from doors.rest.map_schemas import MapAnswer
from doors.rest.monitor_schemas import MonitorChangePage, MonitorOut, MonitorPage
from doors.rest.schemas import JobOut, JobPage, JobSummary, SubmitOut
from doors.validation import (
    validate_map,
    validate_target,
    validate_targets,
)
from fetch.discovery.map_options import MapRequest
from fetch.documents.uploads import Upload
from fetch.errors import FetchError
from fetch.outcomes import Outcome
from fetch.targets import Target, TargetOptions, printable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tool:
    """A tool; its description and input schema are built when asked, so they follow the settings."""

    name: str
    describe: Callable[[], str]
    arguments: Callable[[], dict[str, Any]]
    check: Callable[[dict[str, Any]], Any]
    output: type[Schema]
    run: Callable[[ApiKey, Any], dict[str, Any]]
    annotations: types.ToolAnnotations
    needs_batch: bool = True

    @property
    def description(self) -> str:
        return self.describe()

    @property
    def input_schema(self) -> dict[str, Any]:
        return self.arguments()

    def as_mcp(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema,
            output_schema=_output_schema(self.output),
            annotations=self.annotations,
            # batch_submit may run as a task (doors.mcp.tasks); a task of any other tool is refused.
            execution=types.ToolExecution(
                task_support="optional" if self.name == "batch_submit" else "forbidden"
            ),
        )


@cache
def _output_schema(output: type[Schema]) -> dict[str, Any]:
    # A response schema follows no setting, so it is made once; the input schema is made each time.
    return output.model_json_schema(mode="serialization")


def _shaped(schema: type[Schema], body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as the REST API would send it: through the same response schema, as JSON values."""
    shaped: dict[str, Any] = schema.model_validate(body).model_dump(mode="json")
    return shaped


def fetch_target(arguments: dict[str, Any]) -> Target:
    """The URL and, beside it, the options of a target, validated as ``/v1/fetch`` validates them."""
    options = {name: value for name, value in arguments.items() if name != "url"}
    return validate_target({"url": arguments.get("url"), "options": options}, flat=True)


def fetch(caller: ApiKey, target: Target) -> dict[str, Any]:
    return _shaped(FetchEnvelope, fetch_for(caller, target))


def map_request(arguments: dict[str, Any]) -> MapRequest:
    """The URL and, beside it, the options of a map, validated as ``/v1/map`` validates them."""
    options = {name: value for name, value in arguments.items() if name != "url"}
    return validate_map(arguments.get("url"), options, flat=True)


def map_site(caller: ApiKey, request: MapRequest) -> dict[str, Any]:
    return _shaped(MapAnswer, map_for(caller, request))


def read_document(caller: ApiKey, request: tuple[Upload, TargetOptions]) -> dict[str, Any]:
    return _shaped(FetchEnvelope, read_for(caller, *request))


def validated(model: type[inputs.ToolArguments], arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments as ``model`` takes them, defaults filled in; or ``invalid_request`` naming the
    first one refused in pydantic's words, as django-ninja refuses the REST API's parameters."""
    try:
        return model.model_validate(arguments).model_dump()
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        field = printable(".".join(map(str, error["loc"]))) or "arguments"
        raise Refused(
            Refusal.INVALID_REQUEST,
            f"{field}: {error['msg']}",
            ARGUMENTS_HINT,
            details=[{"field": field, "message": error["msg"]}],
        ) from None


def batch_submit(caller: ApiKey, arguments: dict[str, Any]) -> dict[str, Any]:
    key = validate_idempotency_key(arguments.get("idempotency_key"), name="idempotency_key")
    targets = validate_targets(arguments["targets"])
    callback_url = validate_callback_url(caller, arguments.get("callback_url"))
    submitted = jobs.submit(caller, targets, callback_url=callback_url, idempotency_key=key)
    return _shaped(SubmitOut, {**job_summary(submitted.job, caller), "reused": submitted.reused})


def batch_get(caller: ApiKey, arguments: dict[str, Any]) -> dict[str, Any]:
    body = jobs.read_job(
        caller, arguments["id"], wait=arguments.get("wait", 0), content=arguments.get("content", True)
    )
    return _shaped(JobOut, body)


def batch_cancel(caller: ApiKey, arguments: dict[str, Any]) -> dict[str, Any]:
    return _shaped(JobSummary, job_summary(jobs.cancel_for_caller(caller, arguments["id"]), caller))


def batch_list(caller: ApiKey, arguments: dict[str, Any]) -> dict[str, Any]:
    limit, offset = arguments.get("limit", 20), arguments.get("offset", 0)
    listed, count = jobs.list_jobs(caller, limit=limit, offset=offset)
    items = [job_summary(job, caller) for job in listed]
    return _shaped(JobPage, {"items": items, "count": count, "limit": limit, "offset": offset})


MONITOR_TOOLS = (
    Tool(
        name="watch",
        describe=monitor_tools.watch_description,
        arguments=monitor_tools.watch_arguments,
        check=partial(validated, monitor_tools.WatchArguments),
        output=MonitorOut,
        run=monitor_tools.watch,
        annotations=types.ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
        ),
    ),
    Tool(
        name="unwatch",
        describe=monitor_tools.unwatch_description,
        arguments=monitor_tools.unwatch_arguments,
        check=partial(validated, monitor_tools.UnwatchArguments),
        output=MonitorOut,
        run=monitor_tools.unwatch,
        annotations=types.ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
        ),
    ),
    Tool(
        name="monitors",
        describe=monitor_tools.monitors_description,
        arguments=monitor_tools.monitors_arguments,
        check=partial(validated, monitor_tools.MonitorsArguments),
        output=MonitorPage,
        run=monitor_tools.monitors,
        annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    ),
    Tool(
        name="monitor_changes",
        describe=monitor_tools.changes_description,
        arguments=monitor_tools.changes_arguments,
        check=partial(validated, monitor_tools.ChangesArguments),
        output=MonitorChangePage,
        run=monitor_tools.monitor_changes,
        annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    ),
)

TOOLS = {
    tool.name: tool
    for tool in (
        Tool(
            name="fetch",
            describe=inputs.fetch_description,
            arguments=inputs.fetch_arguments,
            check=fetch_target,
            output=FetchEnvelope,
            run=fetch,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True),
            needs_batch=False,
        ),
        Tool(
            name="read",
            describe=inputs.read_description,
            arguments=inputs.read_arguments,
            check=read_tool.read_request,
            output=FetchEnvelope,
            run=read_document,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
            needs_batch=False,
        ),
        Tool(
            name="map",
            describe=inputs.map_description,
            arguments=inputs.map_arguments,
            check=map_request,
            output=MapAnswer,
            run=map_site,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True),
            needs_batch=False,
        ),
        Tool(
            name="batch_submit",
            describe=inputs.submit_description,
            arguments=inputs.submit_arguments,
            check=partial(validated, inputs.SubmitArguments),
            output=SubmitOut,
            run=batch_submit,
            annotations=types.ToolAnnotations(
                read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True
            ),
        ),
        Tool(
            name="batch_get",
            describe=inputs.get_description,
            arguments=inputs.get_arguments,
            check=partial(validated, inputs.GetArguments),
            output=JobOut,
            run=batch_get,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
        Tool(
            name="batch_cancel",
            describe=inputs.cancel_description,
            arguments=inputs.cancel_arguments,
            check=partial(validated, inputs.CancelArguments),
            output=JobSummary,
            run=batch_cancel,
            annotations=types.ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
            ),
        ),
        Tool(
            name="batch_list",
            describe=inputs.list_description,
            arguments=inputs.list_arguments,
            check=partial(validated, inputs.ListArguments),
            output=JobPage,
            run=batch_list,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
        *MONITOR_TOOLS,
    )
}


def check_arguments(tool: Tool, arguments: dict[str, Any]) -> Any:
    """The arguments checked as ``tool`` takes them, nulls left out (a model may send null for
    "not given"), or ``invalid_request`` naming the argument.

    The targets of a batch are left to ``doors.validation``, which refuses them as the REST
    API does: no_targets, too_many_targets, or invalid_request naming the target's index and field.
    """
    return tool.check({name: value for name, value in arguments.items() if value is not None})


@dataclass(frozen=True)
class CallResult:
    """What a tool call came to: ``ok`` and the result, or an error code and the error envelope."""

    code: str
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.code == "ok"


def call(tool: Tool, caller: ApiKey, arguments: dict[str, Any]) -> CallResult:
    """Run ``tool`` for ``caller`` in this (worker) thread, with a fresh view of the database."""
    started = time.monotonic()
    close_old_connections()
    try:
        outcome = _outcome(tool, caller, arguments)
    finally:
        close_old_connections()
    metrics.MCP_CALLS.labels(tool.name, outcome.code).inc()
    log.info(
        "mcp %s caller=%s outcome=%s ms=%d",
        tool.name,
        caller.name,
        outcome.code,
        (time.monotonic() - started) * 1000,
    )
    return outcome


def _outcome(tool: Tool, caller: ApiKey, arguments: dict[str, Any]) -> CallResult:
    try:
        if tool.needs_batch:
            ensure_batch_enabled()
        return CallResult("ok", tool.run(caller, check_arguments(tool, arguments)))
    except Refused as exc:
        return CallResult(exc.code, refusal_body(exc))
    except FetchError as exc:
        return CallResult(exc.outcome, fetch_error_body(exc))
    except Exception:
        log.exception("mcp %s failed inside sift", tool.name)
        return CallResult(Outcome.INTERNAL, INTERNAL)


INTERNAL = {"error": "internal error", "code": Outcome.INTERNAL, "hint": Outcome.INTERNAL.hint}


def as_result(tool: Tool, outcome: CallResult) -> types.CallToolResult:
    """The MCP result: JSON text for every client, the same object as structured content.

    A fetched document's content gets a text block of its own, so a model reads it as written
    rather than as an escaped JSON string, and its screenshot an image block after it.
    """
    if not outcome.ok:
        text = json.dumps(outcome.body, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=outcome.body, is_error=True
        )
    pictures: list[types.ImageContent] = []
    if tool.name in ("fetch", "read"):
        meta = {k: v for k, v in outcome.body.items() if k != "content"}
        picture = meta.pop("screenshot", None)
        if picture is not None:
            meta["screenshot"] = {k: v for k, v in picture.items() if k != "data"}
            pictures.append(types.ImageContent(data=picture["data"], mime_type=picture["type"]))
        blocks = [json.dumps(meta, ensure_ascii=False), outcome.body["content"]]
    else:
        blocks = [json.dumps(outcome.body, ensure_ascii=False)]
    texts = [types.TextContent(text=block) for block in blocks]
    return types.CallToolResult(content=[*texts, *pictures], structured_content=outcome.body)
