"""What the OpenAPI schema says beyond what django-ninja declares: error descriptions (with the
limits the settings set), response headers and the links from a submitted job to the operations on it."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from ninja import NinjaAPI
from ninja.operation import Operation

from doors.rest.schemas import ErrorOut

# What each error status means, for the OpenAPI schema; every one answers the ErrorOut envelope.
ERROR_DESCRIPTIONS = {
    400: "invalid_request (details name the field), no_targets or too_many_targets",
    401: "unauthorized: no key, or an unknown one",
    403: "forbidden: the key is revoked; for /v1/fetch also blocked: the guard refused the URL",
    404: "not_found: no such job or target for this caller",
    409: (
        "already_finished: the job has already ended; for /v1/fetch document_changed: the document "
        "is no longer the version a cursor or version names (fetch it again from the start)"
    ),
    413: "too_large: the request body is over the size limit",
    415: "unsupported: a content type sift cannot turn into text",
    422: (
        "too_long (over the size caps), filter_timeout (jq or extraction ran out of time) "
        "or memory_limit (jq, extraction or a render ran out of memory)"
    ),
    429: "caller_busy or busy: try again after Retry-After seconds",
    500: "internal: a bug in sift, logged with a traceback",
    502: "upstream_4xx or upstream_5xx: the site answered with an error, or could not be reached",
    503: "jobs_busy (try again after Retry-After) or batch_disabled",
    504: "timeout: the site did not answer within the fetch deadline",
}


def error_responses(*statuses: int) -> dict[int, type[ErrorOut]]:
    """An endpoint's error answers, for its ``response=``: every one is the envelope."""
    return dict.fromkeys(statuses, ErrorOut)


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


def finish_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Error descriptions, response headers and links, which django-ninja cannot declare.

    Made for each request of the document, so the limits it names are the settings' of now.
    """
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
    submit[400]["description"] = (
        "invalid_request (details name the target's index and field), no_targets, or too_many_targets "
        f"(a job holds at most {settings.SIFT_BATCH_TARGETS_PER_JOB})"
    )
    jobs = settings.SIFT_BATCH_JOBS_PER_CALLER
    submit[429]["description"] = (
        f"caller_busy: you already hold {jobs} live job{'s' if jobs != 1 else ''}, as many as a caller "
        "may; try again after Retry-After seconds, or cancel one. With a callback_url, also when your "
        f"{settings.SIFT_FETCH_PER_CALLER} fetches or callback checks at once are in flight here"
    )
    for status in (200, 202):
        submit[status]["links"] = SUBMIT_LINKS
    return schema


class SiftApi(NinjaAPI):
    def get_openapi_operation_id(self, operation: Operation) -> str:
        # Named after the view alone, whichever router module holds it, so clients' ids stay put.
        return f"batch_api_{operation.view_func.__name__}"

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> Any:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        finish_schema(schema)
        return schema
