"""The JSON API under ``/v1`` (SPEC §4): authentication, the error envelope, the batch endpoints.

Views authenticate, validate, call one runner function and return a schema. Every error,
ours or django-ninja's, leaves through ``error_response`` as the one envelope.
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Annotated, Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import NinjaAPI, Path, Query, Router, Status
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer

from batch import runner, waits
from batch.errors import Refused
from batch.fetch import cache, pipeline
from batch.fetch.errors import FetchError
from batch.models import ApiKey, hash_key
from batch.schemas import (
    ErrorOut,
    FetchEnvelope,
    FetchQuery,
    JobOut,
    JobPage,
    JobSummary,
    SubmitIn,
    SubmitOut,
    TargetIn,
    TargetOut,
    job_summary,
    target_out,
)
from batch.targets import printable
from batch.threads import ThreadShares

log = logging.getLogger(__name__)

STATUS_BY_CODE = {
    "invalid_request": 400,
    "no_targets": 400,
    "too_many_targets": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "already_finished": 409,
    "too_large": 413,
    "caller_busy": 429,
    "jobs_busy": 503,
    "batch_disabled": 503,
    "internal": 500,
}
# What each error status means, for the OpenAPI schema; every one answers the ErrorOut envelope.
ERROR_DESCRIPTIONS = {
    400: "invalid_request (details name the field), no_targets or too_many_targets",
    401: "unauthorized: no key, or an unknown one",
    403: "forbidden: the key is revoked; for /v1/fetch also blocked: the guard refused the URL",
    404: "not_found: no such job or target for this caller",
    409: "already_finished: the job has already ended",
    413: "too_large: the request body is over the size limit",
    415: "unsupported: a content type sift cannot turn into text",
    422: "too_long (over the size caps) or filter_timeout (jq or extraction ran out of time or memory)",
    429: "caller_busy or busy: try again after Retry-After seconds",
    500: "internal: a bug in sift, logged with a traceback",
    502: "upstream_4xx or upstream_5xx: the site answered with an error, or could not be reached",
    503: "jobs_busy (try again after Retry-After) or batch_disabled",
    504: "timeout: the site did not answer within the fetch deadline",
}


def errors(*statuses: int) -> dict[int, type[ErrorOut]]:
    return dict.fromkeys(statuses, ErrorOut)


SUBMIT_ERRORS = errors(400, 401, 403, 413, 429, 500, 503)
LIST_ERRORS = errors(400, 401, 403, 500, 503)
JOB_ERRORS = errors(400, 401, 403, 404, 500, 503)
CANCEL_ERRORS = errors(400, 401, 403, 404, 409, 500, 503)
FETCH_ERRORS = errors(400, 401, 403, 415, 422, 429, 500, 502, 504)


class BodyRefused(ValueError):
    def __init__(self, message: str, hint: str, field: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint
        self.field = field


def _refuse_constant(name: str) -> Any:
    raise BodyRefused(f"{name} is not valid JSON", "Send numbers as finite JSON numbers.")


class StrictJsonParser(Parser):
    """JSON as RFC 8259 says: an object, UTF-8 without a BOM, no NaN or Infinity."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        content_type = request.content_type or ""
        if content_type != "application/json" and not content_type.endswith("+json"):
            raise BodyRefused(
                f"content type {content_type or '(none)'!r} is not JSON",
                "Send the body with Content-Type: application/json.",
            )
        body = request.body
        if body.startswith(b"\xef\xbb\xbf"):
            raise BodyRefused("the body starts with a byte order mark", "Send UTF-8 JSON without a BOM.")
        try:
            data = json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)
        except UnicodeDecodeError:
            raise BodyRefused("the body is not UTF-8", "Encode the JSON body as UTF-8.") from None
        except RecursionError:
            raise BodyRefused("the JSON is nested too deeply", "Send a flat JSON object.") from None
        except json.JSONDecodeError as exc:
            raise BodyRefused(f"the body is not valid JSON: {exc}", "Check the JSON syntax.") from None
        except ValueError:  # an integer of more digits than Python converts
            raise BodyRefused(
                "a number in the body has too many digits", "Send numbers of at most a few digits."
            ) from None
        if not isinstance(data, dict):
            raise BodyRefused(
                "the body must be a JSON object", "Send a JSON object; see /v1/docs for its fields."
            )
        if _SURROGATE_ESCAPE.search(body):
            field = _lone_surrogate_field(data)
            if field is not None:
                raise BodyRefused(
                    f"{field}: not valid Unicode text (a lone surrogate)",
                    "Send text as valid UTF-8; escape only whole characters or surrogate pairs.",
                    field,
                )
        return data


# UTF-8 cannot carry a surrogate, so a lone one can only come from a \uD800-\uDFFF escape.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _lone_surrogate_field(data: Any) -> str | None:
    """The path (``targets[0].url``) of the first key or string holding a lone surrogate."""
    pending: list[tuple[Any, str]] = [(data, "")]
    while pending:
        value, path = pending.pop()
        if isinstance(value, str) and not _is_unicode(value):
            return path or "body"
        if isinstance(value, dict):
            for key, item in reversed(value.items()):
                key_path = f"{path}.{printable(key)}" if path else printable(key)
                if not _is_unicode(key):
                    return key_path
                pending.append((item, key_path))
        elif isinstance(value, list):
            pending.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(value))))
    return None


class KeyAuth(HttpBearer):
    """``Authorization: Bearer <key>``: unknown key 401, revoked key 403 (SPEC §2)."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        return caller_for_key(token)


def caller_for_key(raw_key: str) -> ApiKey | None:
    """The caller a bearer key names, for every door (REST and MCP): ``None`` when unknown."""
    if not raw_key or not raw_key.isascii():
        return None  # keys are ASCII: anything else (a WSGI header is Latin-1) is no key
    api_key = ApiKey.objects.filter(key_sha256=hash_key(raw_key)).first()
    if api_key is None:
        return None
    if not api_key.active:
        raise Refused("forbidden", "this API key has been revoked", "Ask an operator for a new key.")
    _note_use(api_key)
    return api_key


def _note_use(api_key: ApiKey) -> None:
    # At most one write a minute per key, so authentication does not turn every read into a write.
    now = timezone.now()
    if api_key.last_used_at is None or (now - api_key.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)


def ensure_batch_enabled() -> None:
    if not settings.SIFT_BATCH_ENABLED:
        raise Refused("batch_disabled", "batch processing is disabled here", "Use /v1/fetch for single URLs.")


class BatchAuth(KeyAuth):
    def __call__(self, request: HttpRequest) -> ApiKey | None:
        ensure_batch_enabled()
        return super().__call__(request)


# Links from a submitted job to the operations on it: clients (and fuzzers) follow them.
_JOB_ID = "$response.body#/id"
SUBMIT_LINKS = {
    "GetJob": {"operationId": "batch_api_get_batch", "parameters": {"job_id": _JOB_ID}},
    "GetFirstTarget": {
        "operationId": "batch_api_get_batch_target",
        "parameters": {"job_id": _JOB_ID, "idx": 0},
    },
    "CancelJob": {"operationId": "batch_api_cancel_batch", "parameters": {"job_id": _JOB_ID}},
}
_TEXT_HEADER = {"schema": {"type": "string"}}


def _finish_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Error descriptions, response headers and links, which django-ninja cannot declare."""
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            for status, response in operation.get("responses", {}).items():
                code = int(status)
                if code in ERROR_DESCRIPTIONS:
                    response["description"] = ERROR_DESCRIPTIONS[code]
                if code in (429, 503):
                    response["headers"] = {
                        "Retry-After": {**_TEXT_HEADER, "description": "Seconds to wait before trying again."}
                    }
    submit = {int(status): item for status, item in schema["paths"]["/v1/batch"]["post"]["responses"].items()}
    submit[202]["description"] = "A new job, queued"
    submit[202]["headers"] = {"Location": {**_TEXT_HEADER, "required": True, "description": "The job's URL."}}
    submit[200]["description"] = "Your live twin of this job, reused"
    for status in (200, 202):
        submit[status]["links"] = SUBMIT_LINKS
    return schema


class SiftApi(NinjaAPI):
    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> Any:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        _finish_schema(schema)
        return schema


api = SiftApi(
    title="sift",
    version="1",
    description="Read the web for agents: clean Markdown, text, PDF pages, jq, grep and questions.",
    parser=StrictJsonParser(),
    docs_url="/docs",
    openapi_url="/openapi.json",
    urls_namespace="v1",
)


def _envelope(
    request: HttpRequest, status: int, body: dict[str, Any], retry_after: float | None = None
) -> HttpResponse:
    if retry_after is not None:
        body["retry_after"] = max(1, math.ceil(retry_after))
    response = api.create_response(request, body, status=status)
    if retry_after is not None:
        response["Retry-After"] = str(body["retry_after"])
    return response


def error_response(request: HttpRequest, exc: Refused) -> HttpResponse:
    body: dict[str, Any] = {"error": exc.message, "code": exc.code, "hint": exc.hint}
    if exc.details is not None:
        body["details"] = exc.details
    return _envelope(request, STATUS_BY_CODE[exc.code], body, exc.retry_after)


@api.exception_handler(FetchError)
def on_fetch_error(request: HttpRequest, exc: FetchError) -> HttpResponse:
    """SPEC §5.8: the outcome is the code; ``upstream_status`` says what the site answered."""
    if exc.outcome == "internal":
        log.error("fetch failed inside sift: %s", exc.message)
    body: dict[str, Any] = {"error": exc.message, "code": exc.outcome, "hint": exc.hint}
    if exc.upstream_status is not None:
        body["upstream_status"] = exc.upstream_status
    retry_after = exc.retry_after if exc.outcome == "busy" else None
    if exc.outcome == "busy" and retry_after is None:
        retry_after = runner.BUSY_RETRY_AFTER
    return _envelope(request, exc.http_status, body, retry_after)


@api.exception_handler(Refused)
def on_refused(request: HttpRequest, exc: Refused) -> HttpResponse:
    return error_response(request, exc)


@api.exception_handler(ValidationError)
def on_validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    details = [
        {"field": ".".join(str(p) for p in e["loc"][1:] if p != "payload") or "body", "message": e["msg"]}
        for e in exc.errors
    ]
    first = details[0]
    return error_response(
        request,
        Refused(
            "invalid_request",
            f"{first['field']}: {first['message']}",
            'Check the request against /v1/docs; a batch body is {"targets": ["https://..."]}.',
            details=details,
        ),
    )


@api.exception_handler(AuthenticationError)
def on_unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return error_response(
        request,
        Refused("unauthorized", "missing or unknown API key", "Send Authorization: Bearer <your key>."),
    )


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    cause = exc.__cause__
    if isinstance(cause, BodyRefused):
        details = None if cause.field is None else [{"field": cause.field, "message": str(cause)}]
        return error_response(request, Refused("invalid_request", str(cause), cause.hint, details=details))
    code = {400: "invalid_request", 404: "not_found", 413: "too_large"}.get(
        exc.status_code, "invalid_request"
    )
    return error_response(request, Refused(code, str(exc), "Check the request against /v1/docs."))


@api.exception_handler(Exception)
def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    log.exception("unhandled error in %s %s", request.method, request.path)
    return error_response(
        request, Refused("internal", "internal error", "This is our bug; retry later or tell the operator.")
    )


batch_router = Router(auth=BatchAuth(), tags=["batch"])

# Bounds that keep path and query numbers inside what the database's integer columns can hold.
MAX_DB_INT = 2**31 - 1
JOB_ID_PATTERN = r"^[0-9a-f]{32}$"
JobId = Annotated[
    str,
    Path(pattern=JOB_ID_PATTERN, description="The job's id: 32 lower-case hex digits, as submit answered."),
]
TargetIdx = Annotated[int, Path(ge=0, le=MAX_DB_INT, description="The target's index, from 0.")]


def _caller(request: HttpRequest) -> ApiKey:
    caller: ApiKey = request.auth  # type: ignore[attr-defined]
    return caller


@batch_router.post(
    "", response={200: SubmitOut, 202: SubmitOut, **SUBMIT_ERRORS}, summary="Submit a batch job"
)
def submit_batch(request: HttpRequest, response: HttpResponse, payload: SubmitIn) -> Status:
    submitted = runner.submit(_caller(request), payload.targets)
    if not submitted.reused:
        response["Location"] = f"/v1/batch/{submitted.job.id}"
    body = {**job_summary(submitted.job, _caller(request)), "reused": submitted.reused}
    return Status(200 if submitted.reused else 202, body)


@batch_router.get("", response={200: JobPage, **LIST_ERRORS}, summary="List your jobs, newest first")
def list_batches(
    request: HttpRequest, limit: int = Query(20, ge=1, le=100), offset: int = Query(0, ge=0, le=MAX_DB_INT)
) -> dict[str, Any]:
    jobs, count = runner.list_jobs(_caller(request), limit=limit, offset=offset)
    items = [job_summary(job, _caller(request)) for job in jobs]
    return {"items": items, "count": count, "limit": limit, "offset": offset}


@batch_router.get(
    "/{job_id}", response={200: JobOut, **JOB_ERRORS}, summary="A job with its targets and results"
)
def get_batch(
    request: HttpRequest, job_id: JobId, wait: int = Query(0, ge=0, le=60), content: bool = True
) -> dict[str, Any]:
    return read_job(_caller(request), job_id, wait=wait, content=content)


def read_job(caller: ApiKey, job_id: str, *, wait: float, content: bool) -> dict[str, Any]:
    """A job with its targets, after a bounded wait: the body of ``GET /v1/batch/{id}`` and MCP's."""
    waited = waits.until_finished(caller, runner.get_job(caller, job_id), seconds=wait)
    targets = [target_out(t, content=content) for t in waited.job.targets.order_by("idx")]
    return {**job_summary(waited.job, caller), "targets": targets, "wait_cut_short": waited.cut_short}


@batch_router.get(
    "/{job_id}/targets/{idx}",
    response={200: TargetOut, **JOB_ERRORS},
    summary="One target with its full result",
)
def get_batch_target(request: HttpRequest, job_id: JobId, idx: TargetIdx) -> dict[str, Any]:
    return target_out(runner.get_target(_caller(request), job_id, idx))


@batch_router.delete("/{job_id}", response={200: JobSummary, **CANCEL_ERRORS}, summary="Cancel a live job")
def cancel_batch(request: HttpRequest, job_id: JobId) -> dict[str, Any]:
    return job_summary(runner.cancel_for_caller(_caller(request), job_id), _caller(request))


api.add_router("/batch", batch_router)


fetch_router = Router(auth=KeyAuth(), tags=["fetch"])


FETCHES = ThreadShares(lambda: settings.SIFT_FETCH_PER_CALLER, lambda: None)


def fetch_for(caller: ApiKey, raw_target: object) -> dict[str, Any]:
    """One target fetched now for ``caller``: what ``/v1/fetch`` and the MCP ``fetch`` tool both do.

    A fetch may hold its request thread for the gate wait and the whole deadline, so a caller
    has only ``SIFT_FETCH_PER_CALLER`` of them in flight per process; one more answers busy.
    """
    target = runner.validate_target(raw_target)
    with FETCHES.share(caller.pk) as granted:
        if not granted:
            raise FetchError(
                "busy",
                f"you already have {settings.SIFT_FETCH_PER_CALLER} fetches in flight here",
                "Wait for one of them to answer, or send many URLs as one batch (POST /v1/batch).",
                retry_after=2,
            )
        return pipeline.fetch(target, partition=cache.partition_for(caller.name, caller.caller_class))


def _fetch(request: HttpRequest, raw_target: dict[str, Any]) -> dict[str, Any]:
    return fetch_for(_caller(request), raw_target)


@fetch_router.get("", response={200: FetchEnvelope, **FETCH_ERRORS}, summary="Fetch one URL now")
def fetch_get(request: HttpRequest, query: Query[FetchQuery]) -> dict[str, Any]:
    unknown = sorted(set(request.GET) - set(FetchQuery.model_fields))
    if unknown:
        raise Refused(
            "invalid_request",
            f"unknown query parameter {unknown[0]!r}",
            "Known parameters: " + ", ".join(FetchQuery.model_fields) + ".",
        )
    options = query.dict(exclude_none=True, exclude={"url"})
    return _fetch(request, {"url": query.url, "options": options})


@fetch_router.post(
    "", response={200: FetchEnvelope, **FETCH_ERRORS, **errors(413)}, summary="Fetch one target now"
)
def fetch_post(request: HttpRequest, payload: TargetIn) -> dict[str, Any]:
    return _fetch(request, payload.dict(exclude_unset=True))


api.add_router("/fetch", fetch_router)
