"""The Idempotency-Key header of POST /v1/batch: same request same job, else 422 (docs/api.md)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from batch import jobs
from batch.errors import Refused
from batch.models import ApiKey, BatchJob, IdempotencyKey
from doors.mcp import tools
from doors.validation import validate_targets

from .factories import ApiClient, MakeCaller

URL = "https://example.org/page"
KEY = "retry-4f1c2d"


def post(client: ApiClient, targets: list[Any], key: str | None = KEY) -> Any:
    headers = dict(client.headers)
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.client.post(
        "/v1/batch", {"targets": targets}, content_type="application/json", headers=headers
    )


def test_same_key_and_targets_answer_the_same_job_with_200_reused(agent):
    _, client = agent
    first = post(client, [URL])
    again = post(client, [URL])
    assert first.status_code == 202
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["reused"] is True
    assert "Location" not in again
    assert BatchJob.objects.count() == 1


@pytest.mark.parametrize("status", ["failed", "cancelled", "done", "running"])
def test_same_key_answers_its_job_whatever_its_status(agent, status):
    _, client = agent
    job_id = post(client, [URL]).json()["id"]
    finished_at = None if status == "running" else "2026-01-01T00:00:00Z"
    BatchJob.objects.filter(pk=job_id).update(status=status, finished_at=finished_at)
    again = post(client, [URL])
    assert again.status_code == 200
    assert again.json()["id"] == job_id
    assert again.json()["status"] == status


def test_same_key_with_other_targets_is_refused_422_and_stores_nothing(agent, settings):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 5
    _, client = agent
    job_id = post(client, [URL]).json()["id"]
    response = post(client, [URL, URL + "2"])
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "idempotency_key_reused"
    assert job_id in body["error"]
    assert "new idempotency key" in body["hint"]
    assert BatchJob.objects.count() == 1


def test_same_key_with_other_options_is_a_different_request(agent):
    _, client = agent
    post(client, [URL])
    response = post(client, [{"url": URL, "options": {"mode": "text"}}])
    assert response.status_code == 422


def test_same_key_with_another_callback_url_is_a_different_request(make_caller):
    caller, _ = make_caller()
    targets = validate_targets([URL])
    job = jobs.submit(caller, targets, callback_url="https://hooks.example.org/a", idempotency_key=KEY).job
    again = jobs.submit(caller, targets, callback_url="https://hooks.example.org/a", idempotency_key=KEY)
    assert (again.job.id, again.reused) == (job.id, True)
    with pytest.raises(Refused) as refused:
        jobs.submit(caller, targets, callback_url="https://hooks.example.org/b", idempotency_key=KEY)
    assert refused.value.code == "idempotency_key_reused"


def test_keys_are_scoped_to_the_caller(make_caller: MakeCaller):
    _, alice = make_caller("alice")
    _, bob = make_caller("bob")
    a = post(alice, [URL])
    b = post(bob, [URL + "?other"])
    assert (a.status_code, b.status_code) == (202, 202)
    assert a.json()["id"] != b.json()["id"]


def test_a_key_is_free_again_once_its_job_is_deleted(agent):
    _, client = agent
    job_id = post(client, [URL]).json()["id"]
    BatchJob.objects.filter(pk=job_id).delete()  # as the sweep and eviction delete it
    assert not IdempotencyKey.objects.exists()
    again = post(client, [URL + "?new"])
    assert again.status_code == 202
    assert again.json()["id"] != job_id


def test_a_new_key_on_a_content_twin_answers_the_twin_and_is_remembered(agent):
    _, client = agent
    job_id = post(client, [URL], key=None).json()["id"]
    reused = post(client, [URL])
    assert (reused.status_code, reused.json()["id"]) == (200, job_id)
    BatchJob.objects.filter(pk=job_id).update(status="cancelled", finished_at="2026-01-01T00:00:00Z")
    # Content reuse skips a cancelled job; the key still names it.
    assert post(client, [URL], key=None).status_code == 202
    again = post(client, [URL])
    assert (again.status_code, again.json()["id"]) == (200, job_id)


def test_a_refused_submit_does_not_take_the_key(agent, settings):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    _, client = agent
    post(client, [URL], key="first")
    assert post(client, [URL + "?2"]).status_code == 429
    assert not IdempotencyKey.objects.filter(key=KEY).exists()


def test_without_the_header_content_reuse_stands(agent):
    _, client = agent
    first = post(client, [URL], key=None)
    again = post(client, [URL], key=None)
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["id"] == first.json()["id"]


def test_a_key_of_255_printable_characters_is_accepted(agent):
    _, client = agent
    key = "K" * 100 + " ~!#$%&'*+-.^_`|" + "z" * 139
    assert len(key) == 255
    assert post(client, [URL], key=key).status_code == 202
    assert IdempotencyKey.objects.get().key == key


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("a" * 256, "more than 255"),
        ("caf\u00e9", "printable ASCII"),
        ("a\tb", "printable ASCII"),
    ],
)
def test_a_malformed_key_is_refused_400_naming_the_header(agent, key, problem):
    _, client = agent
    response = post(client, [URL], key=key)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request"
    assert "Idempotency-Key" in body["error"]
    assert problem in body["error"]
    assert "Idempotency-Key" in body["hint"]
    assert body["details"][0]["field"] == "Idempotency-Key"
    assert not BatchJob.objects.exists()


def test_an_empty_key_is_refused_400(agent):
    _, client = agent
    # Django's test client sends the header as given; a real server trims the blanks first.
    for key in ("", "   "):
        response = post(client, [URL], key=key)
        assert response.status_code == 400
        assert "is empty" in response.json()["error"]
    assert not BatchJob.objects.exists()


def test_openapi_describes_the_header_and_the_422(db):
    operation = Client().get("/v1/openapi.json").json()["paths"]["/v1/batch"]["post"]
    header = next(p for p in operation["parameters"] if p["name"] == "Idempotency-Key")
    assert header["in"] == "header"
    assert header["required"] is False
    assert "idempotency_key_reused" in header["description"]
    assert "422" in operation["responses"]


def test_keys_are_remembered_per_caller_in_the_database(make_caller: MakeCaller):
    alice, _ = make_caller("alice")
    bob: ApiKey = make_caller("bob")[0]
    jobs.submit(alice, validate_targets([URL]), idempotency_key=KEY)
    jobs.submit(bob, validate_targets([URL]), idempotency_key=KEY)
    assert IdempotencyKey.objects.filter(key=KEY).count() == 2


def test_mcp_batch_submit_takes_the_key_as_an_argument(make_caller: MakeCaller):
    caller, _ = make_caller()
    schema = tools.TOOLS["batch_submit"].input_schema
    assert schema["properties"]["idempotency_key"]["maxLength"] == 255
    first = tools.batch_submit(caller, {"targets": [URL], "idempotency_key": KEY})
    again = tools.batch_submit(caller, {"targets": [URL], "idempotency_key": KEY})
    assert (again["id"], again["reused"]) == (first["id"], True)
    with pytest.raises(Refused) as refused:
        tools.batch_submit(caller, {"targets": [URL + "2"], "idempotency_key": KEY})
    assert refused.value.code == "idempotency_key_reused"
    with pytest.raises(Refused) as malformed:
        tools.batch_submit(caller, {"targets": [URL], "idempotency_key": "caf\u00e9"})
    assert malformed.value.code == "invalid_request"
    assert "idempotency_key" in malformed.value.hint
