"""/healthz and the operator commands that are not about jobs."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from batch.models import ApiKey, ClusterHeartbeat, hash_key


def test_healthz_says_the_cluster_is_stale_when_none_was_seen(db, client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"db": "ok", "cluster": "stale"}


def test_healthz_says_ok_for_a_cluster_seen_within_a_minute(db, client):
    ClusterHeartbeat.objects.create(name="host:1", seen_at=timezone.now() - timedelta(seconds=20))
    assert client.get("/healthz").json() == {"db": "ok", "cluster": "ok"}
    ClusterHeartbeat.objects.update(seen_at=timezone.now() - timedelta(seconds=90))
    assert client.get("/healthz").json()["cluster"] == "stale"


def test_healthz_is_503_when_the_database_is_down(db, client, monkeypatch):
    from django.db import DatabaseError, connection

    def broken(*args, **kwargs):
        raise DatabaseError("connection refused")

    with monkeypatch.context() as patch:
        patch.setattr(connection, "cursor", broken)
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["db"] == "down"


def test_create_api_key_prints_a_key_that_authenticates(db, client):
    out = StringIO()
    call_command("create_api_key", "ops-bot", "--workspace", "ops", "--class", "restricted", stdout=out)
    raw_key = out.getvalue().strip()
    api_key = ApiKey.objects.get(name="ops-bot")
    assert (api_key.workspace, api_key.caller_class, api_key.key_sha256) == (
        "ops",
        "restricted",
        hash_key(raw_key),
    )
    assert client.get("/v1/batch", headers={"Authorization": f"Bearer {raw_key}"}).status_code == 200


def test_create_api_key_refuses_a_taken_name(db):
    call_command("create_api_key", "twice", stdout=StringIO())
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_api_key", "twice", stdout=StringIO())


def test_create_api_key_refuses_an_unknown_class(db):
    with pytest.raises(CommandError):
        call_command("create_api_key", "x", "--class", "vip", stdout=StringIO())


def test_setup_demo_issues_a_working_key_each_time(db, client):
    keys = []
    for _ in range(2):
        out = StringIO()
        call_command("setup_demo", stdout=out)
        keys.append(out.getvalue().split("demo API key : ")[1].split()[0])
    assert keys[0] != keys[1]
    assert client.get("/v1/batch", headers={"Authorization": f"Bearer {keys[0]}"}).status_code == 401
    assert client.get("/v1/batch", headers={"Authorization": f"Bearer {keys[1]}"}).status_code == 200
    assert client.login(username="admin", password=out.getvalue().split("password ")[1].split()[0])


def test_docs_and_schema_are_served_without_a_cdn(db, client):
    docs = client.get("/v1/docs")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "cdn" not in html.lower()
    assert "/static/ninja/swagger-ui-bundle.js" in html
    schema = client.get("/v1/openapi.json").json()
    assert "/v1/batch" in schema["paths"]
