"""The batch endpoints under ``/v1/batch``: submit, list, read, read one target, cancel (docs/api.md).

Each one authenticates, validates, calls one function of the jobs service (``batch.jobs``) and
returns a schema.
"""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from ninja import Header, Path, Query, Router, Status

from batch import jobs
from batch.models import JOB_ID_PATTERN, MAX_DB_INT
from batch.summaries import job_summary, target_out
from doors.auth import BatchAuth, caller_of
from doors.callbacks import validate_callback_url
from doors.idempotency import HEADER, MAX_LENGTH, validate_idempotency_key
from doors.rest import job_body
from doors.rest.openapi import error_responses
from doors.rest.schemas import JobOut, JobPage, JobSummary, SubmitIn, SubmitOut, TargetOut
from doors.validation import validate_targets

SUBMIT_ERRORS = error_responses(400, 401, 403, 413, 422, 429, 500, 503)
LIST_ERRORS = error_responses(400, 401, 403, 500, 503)
JOB_ERRORS = error_responses(400, 401, 403, 404, 500, 503)
READ_ERRORS = error_responses(400, 401, 403, 404, 429, 500, 503)
CANCEL_ERRORS = error_responses(400, 401, 403, 404, 409, 500, 503)

JobId = Annotated[
    str,
    Path(pattern=JOB_ID_PATTERN, description="The job's id: 32 lower-case hex digits, as submit answered."),
]
TargetIdx = Annotated[int, Path(ge=0, le=MAX_DB_INT, description="The target's index, from 0.")]
# Checked by validate_idempotency_key, whose refusal names the header; the schema only describes it.
IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        None,
        alias=HEADER,
        description=(
            f"Optional: 1 to {MAX_LENGTH} printable ASCII characters naming this request, e.g. a UUID. "
            "Sent again with the same targets (and callback_url), it answers the same job (200, "
            "reused: true) whatever its status; with a different request, 422 idempotency_key_reused. "
            "Keys are per caller and remembered while their job exists."
        ),
        example="5f0c2e8e-7d4b-4c43-9b57-3f1d2a9c8e11",
    ),
]

router = Router(auth=BatchAuth(), tags=["batch"])


@router.post("", response={200: SubmitOut, 202: SubmitOut, **SUBMIT_ERRORS}, summary="Submit a batch job")
def submit_batch(
    request: HttpRequest,
    response: HttpResponse,
    payload: SubmitIn,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Status:
    caller = caller_of(request)
    key = validate_idempotency_key(idempotency_key)
    targets = validate_targets(payload.targets)
    callback_url = validate_callback_url(caller, payload.callback_url)
    submitted = jobs.submit(caller, targets, callback_url=callback_url, idempotency_key=key)
    if not submitted.reused:
        response["Location"] = f"/v1/batch/{submitted.job.id}"
    body = {**job_summary(submitted.job, caller), "reused": submitted.reused}
    return Status(200 if submitted.reused else 202, body)


@router.get("", response={200: JobPage, **LIST_ERRORS}, summary="List your jobs, newest first")
def list_batches(
    request: HttpRequest, limit: int = Query(20, ge=1, le=100), offset: int = Query(0, ge=0, le=MAX_DB_INT)
) -> dict[str, Any]:
    listed, count = jobs.list_jobs(caller_of(request), limit=limit, offset=offset)
    items = [job_summary(job, caller_of(request)) for job in listed]
    return {"items": items, "count": count, "limit": limit, "offset": offset}


@router.get("/{job_id}", response={200: JobOut, **READ_ERRORS}, summary="A job with its targets and results")
def get_batch(
    request: HttpRequest, job_id: JobId, wait: int = Query(0, ge=0, le=60), content: bool = True
) -> dict[str, Any] | HttpResponseBase:
    caller = caller_of(request)
    waited = jobs.wait_for_job(caller, job_id, wait=wait)
    if job_body.too_large_to_hold(waited):
        return job_body.job_answer(caller, waited, content=content)
    return jobs.job_with_targets(caller, waited, content=content)


@router.get(
    "/{job_id}/targets/{idx}",
    response={200: TargetOut, **JOB_ERRORS},
    summary="One target with its full result",
)
def get_batch_target(request: HttpRequest, job_id: JobId, idx: TargetIdx) -> dict[str, Any]:
    return target_out(jobs.get_target(caller_of(request), job_id, idx))


@router.delete("/{job_id}", response={200: JobSummary, **CANCEL_ERRORS}, summary="Cancel a live job")
def cancel_batch(request: HttpRequest, job_id: JobId) -> dict[str, Any]:
    return job_summary(jobs.cancel_for_caller(caller_of(request), job_id), caller_of(request))
