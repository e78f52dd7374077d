"""Bearer keys (docs/api.md): 401 without or with an unknown key, 403 revoked, 404 for others' jobs."""

from __future__ import annotations

import pytest
from django.utils import timezone

from batch.models import ApiKey, BatchJob
from doors.auth import caller_for_key

from .factories import ApiClient, MakeCaller, submit

URL = "https://example.org/"


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer sk_unknown"}, {"Authorization": "Basic abc"}]
)
def test_a_request_without_a_known_key_is_401(db, client, headers):
    response = client.get("/v1/batch", headers=headers)
    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"
    assert "Bearer" in response.json()["hint"]


def test_a_revoked_key_is_403(agent):
    api_key, client = agent
    ApiKey.objects.filter(pk=api_key.pk).update(active=False)
    response = client.post("/v1/batch", {"targets": [URL]})
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
    assert not BatchJob.objects.exists()


def test_the_key_itself_is_never_stored(agent):
    api_key, client = agent
    raw_key = client.raw_key
    stored = ApiKey.objects.filter(pk=api_key.pk).values_list()[0]
    assert raw_key not in [str(value) for value in stored]


def test_another_callers_job_is_404_on_get_target_and_delete_like_an_unknown_id(make_caller: MakeCaller):
    _, alice = make_caller("alice")
    _, bob = make_caller("bob")
    job_id = submit(alice, [URL])["id"]
    unknown = bob.get("/v1/batch/0123456789abcdef0123456789abcdef")
    for response in (
        bob.get(f"/v1/batch/{job_id}"),
        bob.get(f"/v1/batch/{job_id}/targets/0"),
        bob.delete(f"/v1/batch/{job_id}"),
    ):
        assert response.status_code == 404
        assert response.json() == {**unknown.json(), "error": response.json()["error"]}
    assert BatchJob.objects.get(pk=job_id).status == "queued"
    assert bob.get("/v1/batch").json()["count"] == 0


def test_use_of_a_key_is_recorded(agent):
    api_key, client = agent
    client.get("/v1/batch")
    api_key.refresh_from_db()
    assert api_key.last_used_at is not None


def test_an_unauthenticated_client_helper_still_gets_json(db):
    response = ApiClient(None).post("/v1/batch", {"targets": [URL]})
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer \ud800",
        "Bearer \u4e2d\u6587",
        "Bearer \x00",
        "Bearer \xff\xfe",
        "Bearer ",
        "Bearer  x y",
        "\ud800",
    ],
    ids=["surrogate", "non-latin-1", "nul", "latin-1-bytes", "empty", "spaces", "surrogate-scheme"],
)
def test_an_unencodable_or_odd_authorization_header_is_401(db, client, authorization):
    response = client.get("/v1/batch", headers={"Authorization": authorization})
    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"


def test_a_key_with_odd_bytes_appended_is_401(agent):
    _, client = agent
    response = client.client.get(
        "/v1/batch", headers={"Authorization": client.headers["Authorization"] + "\xff"}
    )
    assert response.status_code == 401


def test_the_caller_a_key_names_is_read_as_the_orm_reads_it(db):
    # caller_for_key reads the row with plain SQL: every value must come back as the ORM's,
    # booleans and datetimes included (SQLite stores them as integers and text).
    api_key, raw_key = ApiKey.issue("plain", workspace="ws", caller_class="restricted")
    ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=timezone.now())
    read = caller_for_key(raw_key)
    assert read is not None
    expected = ApiKey.objects.get(pk=api_key.pk)
    fields = [f.attname for f in ApiKey._meta.concrete_fields]
    assert [getattr(read, f) for f in fields] == [getattr(expected, f) for f in fields]
    assert read.active is True
    assert not read._state.adding
