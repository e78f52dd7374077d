"""The MCP tools: each one calls the functions the REST API calls, and answers what it answers.

A tool takes a caller and its arguments and returns a JSON object shaped by the REST API's own
response schemas, or raises the REST API's errors (``Refused``, ``FetchError``). There is no
second path: validation, caps, the guard, the gate and the cache are the ones ``/v1`` uses.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import mcp_types as types
from django.db import close_old_connections
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from ninja import Schema

from batch import jobs, metrics
from batch.errors import Refusal, Refused
from batch.models import ApiKey
from batch.summaries import job_summary
from doors.auth import ensure_batch_enabled
from doors.callbacks import validate_callback_url
from doors.direct import fetch_for, map_for
from doors.errors import fetch_error_body, refusal_body
from doors.idempotency import validate_idempotency_key
from doors.mcp import inputs
from doors.rest.map_schemas import MapAnswer
from doors.rest.schemas import FetchEnvelope, JobOut, JobPage, JobSummary, SubmitOut
from doors.validation import validate_map, validate_target, validate_targets
from fetch.errors import FetchError
from fetch.outcomes import Outcome

log = logging.getLogger(__name__)

ARGUMENTS_HINT = "Check the arguments against this tool's input schema (tools/list)."
QUOTED_CHARS = 60


@dataclass(frozen=True)
class Tool:
    """A tool; its description and input schema are built when asked, so they follow the settings."""

    name: str
    describe: Callable[[], str]
    arguments: Callable[[], dict[str, Any]]
    output: type[Schema]
    run: Callable[[ApiKey, dict[str, Any]], dict[str, Any]]
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


def fetch(caller: ApiKey, arguments: dict[str, Any]) -> dict[str, Any]:
    options = {name: value for name, value in arguments.items() if name != "url"}
    target = validate_target({"url": arguments["url"], "options": options})
    return _shaped(FetchEnvelope, fetch_for(caller, target))


def map_site(caller: ApiKey, arguments: dict[str, Any]) -> dict[str, Any]:
    options = {name: value for name, value in arguments.items() if name != "url"}
    return _shaped(MapAnswer, map_for(caller, validate_map(arguments["url"], options)))


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


TOOLS = {
    tool.name: tool
    for tool in (
        Tool(
            name="fetch",
            describe=inputs.fetch_description,
            arguments=inputs.fetch_arguments,
            output=FetchEnvelope,
            run=fetch,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True),
            needs_batch=False,
        ),
        Tool(
            name="map",
            describe=inputs.map_description,
            arguments=inputs.map_arguments,
            output=MapAnswer,
            run=map_site,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True),
            needs_batch=False,
        ),
        Tool(
            name="batch_submit",
            describe=inputs.submit_description,
            arguments=inputs.submit_arguments,
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
            output=JobOut,
            run=batch_get,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
        Tool(
            name="batch_cancel",
            describe=inputs.cancel_description,
            arguments=inputs.cancel_arguments,
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
            output=JobPage,
            run=batch_list,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
    )
}


def check_arguments(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments without nulls (a model may send null for "not given"), or ``invalid_request``.

    The targets of a batch are left to ``doors.validation``, which refuses them as the REST
    API does: no_targets, too_many_targets, or invalid_request naming the target's index and field.
    """
    given = {name: value for name, value in arguments.items() if value is not None}
    validator = Draft202012Validator(tool.input_schema)
    errors = [e for e in validator.iter_errors(given) if not _about_the_targets(e)]
    if errors:
        first = min(errors, key=lambda e: list(map(str, e.absolute_path)))
        field = ".".join(map(str, first.absolute_path)) or "arguments"
        message = _message(first)
        raise Refused(
            Refusal.INVALID_REQUEST,
            f"{field}: {message}",
            ARGUMENTS_HINT,
            details=[{"field": field, "message": message}],
        )
    return given


def _message(error: ValidationError) -> str:
    """jsonschema's message, quoting at most the start of a long string (a 4000-character jq)."""
    instance = error.instance
    if isinstance(instance, str) and len(instance) > QUOTED_CHARS:
        return error.message.replace(repr(instance), repr(instance[:QUOTED_CHARS]) + "...")
    return error.message


def _about_the_targets(error: ValidationError) -> bool:
    path = error.absolute_path
    if not path or path[0] != "targets":
        return False
    return len(path) >= 2 or error.validator in ("minItems", "maxItems")


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
    rather than as an escaped JSON string.
    """
    if not outcome.ok:
        text = json.dumps(outcome.body, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=outcome.body, is_error=True
        )
    if tool.name == "fetch":
        meta = {k: v for k, v in outcome.body.items() if k != "content"}
        blocks = [json.dumps(meta, ensure_ascii=False), outcome.body["content"]]
    else:
        blocks = [json.dumps(outcome.body, ensure_ascii=False)]
    return types.CallToolResult(
        content=[types.TextContent(text=block) for block in blocks], structured_content=outcome.body
    )
