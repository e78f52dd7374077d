"""Hostile input to POST /v1/batch: always the error envelope, never a 500, nothing stored."""

from __future__ import annotations

import json

import pytest

from batch.models import BatchJob, BatchTarget


def _post_raw(client, body: bytes | str, content_type: str = "application/json"):
    return client.client.generic("POST", "/v1/batch", body, content_type=content_type, headers=client.headers)


def _assert_refused(response, status: int = 400, code: str = "invalid_request") -> None:
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code
    assert body["error"]
    assert body["hint"]
    assert not BatchJob.objects.exists()
    assert not BatchTarget.objects.exists()


def test_a_10_mb_body_is_413_too_large(agent):
    _, client = agent
    body = json.dumps({"targets": ["https://example.org/" + "a" * 10_000_000]})
    _assert_refused(_post_raw(client, body), 413, "too_large")


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'"targets"',
        b"null",
        b"42",
        b'{"targets": [NaN]}',
        b'{"targets": ["https://example.org/"], "n": Infinity}',
        b'\xef\xbb\xbf{"targets": ["https://example.org/"]}',
        b"[" * 10_000 + b"]" * 10_000,
        b'{"targets": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
        b'{"targets": ["https://example.org/"',
        b'{"targets": ["https://example.org/\xff"]}',
        b'{"targets": "https://example.org/"}',
        b'{"targets": {"url": "https://example.org/"}}',
        b'{"targets": null}',
        b'{"target": ["https://example.org/"]}',
        b'{"targets": ["https://example.org/"], "priority": 1}',
        b"{}",
    ],
    ids=[
        "array", "string", "null", "number", "nan", "infinity", "bom", "deep-array", "deep-targets",
        "truncated", "latin1", "targets-string", "targets-object", "targets-null", "misspelt",
        "extra-field", "empty-object",
    ],
)  # fmt: skip
def test_malformed_bodies_are_400_with_the_envelope(agent, body):
    _, client = agent
    _assert_refused(_post_raw(client, body))


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_the_wrong_content_type_is_400(agent, content_type):
    _, client = agent
    _assert_refused(_post_raw(client, b'{"targets": ["https://example.org/"]}', content_type))


def test_an_empty_body_is_400(agent):
    _, client = agent
    _assert_refused(_post_raw(client, b""))


@pytest.mark.parametrize(
    "url",
    [
        "https://example.org/\x00admin",
        "https://example.org/" + "a" * 100_000,
        "https://exa mple.org/",
        "https://example.org:99999/",
        "https://[::1/",
        "javascript:alert(1)",
        "",
    ],
    ids=["nul", "100kb", "space", "bad-port", "bad-ipv6", "javascript", "empty"],
)
def test_hostile_urls_are_400_naming_the_target(agent, url):
    _, client = agent
    response = client.post("/v1/batch", {"targets": [url]})
    _assert_refused(response)
    assert response.json()["details"][0]["field"] == "targets[0].url"


def test_nul_bytes_in_options_are_400(agent):
    _, client = agent
    _assert_refused(
        client.post("/v1/batch", {"targets": [{"url": "https://example.org/", "options": {"grep": "a\x00"}}]})
    )


def test_an_unknown_api_path_is_a_json_404(agent):
    _, client = agent
    response = client.get("/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_a_wrong_method_is_answered_in_json(agent):
    _, client = agent
    response = client.client.put("/v1/batch", b"{}", content_type="application/json", headers=client.headers)
    assert response.status_code == 405
    assert response["Content-Type"].startswith("application/json")
