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
from typing import Any

import mcp_types as types
from django.db import close_old_connections
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from ninja import Schema

from batch import jobs, metrics
from batch.api.auth import ensure_batch_enabled
from batch.api.callbacks import validate_callback_url
from batch.api.errors import fetch_error_body, refusal_body
from batch.api.idempotency import MAX_LENGTH as MAX_KEY_LENGTH
from batch.api.idempotency import validate_idempotency_key
from batch.api.schemas import FetchEnvelope, JobOut, JobPage, JobSummary, SubmitOut
from batch.api.validation import validate_target, validate_targets
from batch.errors import Refusal, Refused
from batch.fetching import fetch_for
from batch.models import JOB_ID_PATTERN, MAX_DB_INT, ApiKey
from batch.summaries import job_summary
from fetch.errors import FetchError
from fetch.limits import MAX_URL_CHARS
from fetch.outcomes import Outcome
from fetch.targets import MODES

log = logging.getLogger(__name__)

OPTION_PROPERTIES: dict[str, Any] = {
    "mode": {
        "type": "string",
        "enum": list(MODES),
        "description": "markdown (default): the main content as Markdown; text: the main content as "
        "plain text; raw: the decoded body exactly as served.",
    },
    "question": {
        "type": "string",
        "description": "Keep only the passages that answer this question, best first.",
    },
    "pages": {"type": "string", "description": 'PDF pages to return, 1-based, e.g. "1-3,7,10-".'},
    "grep": {
        "type": "string",
        "description": "Keep only the lines that match this regular expression (RE2 syntax).",
    },
    "jq": {
        "type": "string",
        "description": "A jq program applied to a JSON document, e.g. '.items[] | .name'.",
    },
    "context": {
        "type": "boolean",
        "description": "With grep or question: include the neighbouring lines or passages. "
        "Default: on when there is a question.",
    },
    "recover": {
        "type": "boolean",
        "description": "When the site fails, answer the last cached copy, marked stale.",
    },
    "render": {
        "type": "boolean",
        "description": "Run the page's scripts in a headless browser and read the rendered page "
        "(for pages built by JavaScript; slower).",
    },
    "robots": {
        "type": "boolean",
        "description": "Obey the site's robots.txt for the product token sift: a disallowed URL is "
        "refused blocked.",
    },
}
URL_PROPERTY = {"type": "string", "description": "An absolute http:// or https:// URL."}
JOB_ID_PROPERTY = {
    "type": "string",
    "pattern": JOB_ID_PATTERN,
    "description": "The job id batch_submit answered: 32 lower-case hex digits.",
}
ARGUMENTS_HINT = "Check the arguments against this tool's input schema (tools/list)."


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    output: type[Schema]
    run: Callable[[ApiKey, dict[str, Any]], dict[str, Any]]
    annotations: types.ToolAnnotations
    needs_batch: bool = True

    def as_mcp(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema,
            output_schema=self.output.model_json_schema(mode="serialization"),
            annotations=self.annotations,
        )


def _shaped(schema: type[Schema], body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as the REST API would send it: through the same response schema, as JSON values."""
    shaped: dict[str, Any] = schema.model_validate(body).model_dump(mode="json")
    return shaped


def fetch(caller: ApiKey, arguments: dict[str, Any]) -> dict[str, Any]:
    options = {name: value for name, value in arguments.items() if name != "url"}
    target = validate_target({"url": arguments["url"], "options": options})
    return _shaped(FetchEnvelope, fetch_for(caller, target))


def batch_submit(caller: ApiKey, arguments: dict[str, Any]) -> dict[str, Any]:
    key = validate_idempotency_key(arguments.get("idempotency_key"), name="idempotency_key")
    targets = validate_targets(arguments["targets"])
    callback_url = validate_callback_url(arguments.get("callback_url"))
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


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


TARGET_SCHEMA = {
    "anyOf": [
        {**URL_PROPERTY, "description": "A URL, read with the default options."},
        _object({"url": URL_PROPERTY, "options": _object(OPTION_PROPERTIES)}, ("url",)),
    ]
}

TOOLS = {
    tool.name: tool
    for tool in (
        Tool(
            name="fetch",
            description=(
                "Read one web page, PDF or JSON document now and get it back ready to read: the main "
                "text of an HTML page as Markdown (boilerplate removed), chosen PDF pages, a jq view of "
                "JSON, only the lines matching grep, or only the passages answering a question. The "
                "first text block is the metadata (final URL, title, upstream status, whether it came "
                "from the cache or is stale); the second is the content. A refusal (blocked address, "
                "site error, timeout, too long) is an error result with a code and a hint saying what "
                "to do next. For many URLs at once use batch_submit."
            ),
            input_schema=_object({"url": URL_PROPERTY, **OPTION_PROPERTIES}, ("url",)),
            output=FetchEnvelope,
            run=fetch,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True),
            needs_batch=False,
        ),
        Tool(
            name="batch_submit",
            description=(
                "Queue up to 32 URLs to be read in the background, when you need many documents. "
                "Each target is a URL string, or {url, options} with the options of fetch. Answers the "
                "job (its id and status) at once; then call batch_get with the id and wait to collect "
                "the results. Submitting the same targets again while that job lives answers the same "
                "job (reused: true). You may hold only one live job at a time: if refused with "
                "caller_busy, wait for your job with batch_get or cancel it with batch_cancel."
            ),
            input_schema=_object(
                {
                    "targets": {
                        "type": "array",
                        "items": TARGET_SCHEMA,
                        "description": "The URLs to read, at most 32.",
                    },
                    "idempotency_key": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_KEY_LENGTH,
                        "description": (
                            "Optional: a value you choose once for this request (e.g. a UUID), to retry it "
                            "safely: sent again with the same targets it answers the same job, whatever its "
                            "status; with other targets it is refused idempotency_key_reused."
                        ),
                    },
                    "callback_url": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_URL_CHARS,
                        "description": (
                            "Optional: when the job finishes, its summary is POSTed to this URL, signed "
                            "with your key's webhook secret (Standard Webhooks). It must pass the same "
                            "checks as a fetch."
                        ),
                    },
                },
                ("targets",),
            ),
            output=SubmitOut,
            run=batch_submit,
            annotations=types.ToolAnnotations(
                read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True
            ),
        ),
        Tool(
            name="batch_get",
            description=(
                "A batch job with each target's status and result (the content and the same metadata "
                "as fetch) or error, outcome and hint. wait holds the call until the job has finished "
                "or that many seconds have passed; content: false leaves the documents' text out, to "
                "check progress cheaply."
            ),
            input_schema=_object(
                {
                    "id": JOB_ID_PROPERTY,
                    "wait": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": 60,
                        "default": 0,
                        "description": "Seconds to wait for the job to finish, 0 to 60.",
                    },
                    "content": {
                        "type": "boolean",
                        "default": True,
                        "description": "false: leave each result's content out, keep its metadata.",
                    },
                },
                ("id",),
            ),
            output=JobOut,
            run=batch_get,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
        Tool(
            name="batch_cancel",
            description=(
                "Cancel one of your live batch jobs: targets not started yet never start, results "
                "already stored stay readable. A job that has already finished answers already_finished."
            ),
            input_schema=_object({"id": JOB_ID_PROPERTY}, ("id",)),
            output=JobSummary,
            run=batch_cancel,
            annotations=types.ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
            ),
        ),
        Tool(
            name="batch_list",
            description="Your batch jobs, newest first, without their results (use batch_get for those).",
            input_schema=_object(
                {
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                    "offset": {"type": "integer", "minimum": 0, "maximum": MAX_DB_INT, "default": 0},
                }
            ),
            output=JobPage,
            run=batch_list,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
    )
}
_VALIDATORS = {name: Draft202012Validator(tool.input_schema) for name, tool in TOOLS.items()}


def check_arguments(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments without nulls (a model may send null for "not given"), or ``invalid_request``.

    A bad batch target is left to ``batch.api.validation``, which names its index and field as
    the REST API does.
    """
    given = {name: value for name, value in arguments.items() if value is not None}
    errors = [e for e in _VALIDATORS[tool.name].iter_errors(given) if not _inside_a_target(e)]
    if errors:
        first = min(errors, key=lambda e: list(map(str, e.absolute_path)))
        field = ".".join(map(str, first.absolute_path)) or "arguments"
        raise Refused(
            Refusal.INVALID_REQUEST,
            f"{field}: {first.message}",
            ARGUMENTS_HINT,
            details=[{"field": field, "message": first.message}],
        )
    return given


def _inside_a_target(error: ValidationError) -> bool:
    return len(error.absolute_path) >= 2 and error.absolute_path[0] == "targets"


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
