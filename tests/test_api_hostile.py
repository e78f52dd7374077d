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
        b'{"targets": [' + b"1" * 5000 + b"]}",
    ],
    ids=[
        "array", "string", "null", "number", "nan", "infinity", "bom", "deep-array", "deep-targets",
        "truncated", "latin1", "targets-string", "targets-object", "targets-null", "misspelt",
        "extra-field", "empty-object", "huge-integer",
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


# Unencodable text and odd bytes, through every way into a request ---------------------------


def _wsgi(method: str, path: bytes, query: bytes = b"", body: bytes = b"", **environ: str):
    """A request as a WSGI server hands it over: path, query and headers as Latin-1 strings of raw
    bytes, so nothing is encoded on the way as the test client would."""
    import io
    import sys

    from django.core import signals
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import close_old_connections

    base = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path.decode("latin-1"),
        "QUERY_STRING": query.decode("latin-1"),
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        **environ,
    }
    started: dict[str, str] = {}

    def start_response(status, headers, exc_info=None):
        started["status"] = status
        started["content_type"] = dict(headers).get("Content-Type", "")

    # As the test client does: keep the test's database connection open across the request.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        response = WSGIHandler()(base, start_response)
        content = b"".join(response)
        response.close()
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
    return int(started["status"].split()[0]), started["content_type"], json.loads(content)


def lone(template: str) -> str:
    """``template`` with LONE spelt as JSON spells a lone surrogate, which json.loads keeps."""
    return template.replace("LONE", "\\ud800")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (lone('{"targets": ["https://example.org/LONE"]}'), "targets[0]"),
        (lone('{"targets": [{"url": "https://example.org/LONE"}]}'), "targets[0].url"),
        (lone('{"targets": [{"url": "https://example.org/", "options": {"grep": "aLONE"}}]}'),
         "targets[0].options.grep"),
        (lone('{"targets": [{"url": "https://example.org/", "options": {"question": "LONE"}}]}'),
         "targets[0].options.question"),
        (lone('{"targets": [{"url": "https://example.org/", "options": {"mode": "LONE"}}]}'),
         "targets[0].options.mode"),
        (lone('{"targets": [{"url": "https://example.org/", "options": {"qLONE": 1}}]}'),
         "targets[0].options.q\\ud800"),
        ('{"targets": ["https://example.org/"], "\\udc00": 1}', "\\udc00"),
    ],
    ids=["bare-url", "url", "grep", "question", "mode", "option-name", "body-key"],
)  # fmt: skip
def test_a_lone_surrogate_anywhere_in_a_batch_body_is_400_naming_the_field(agent, body, field):
    _, client = agent
    response = _post_raw(client, body.encode())
    _assert_refused(response)
    assert response.json()["details"][0]["field"] == field


@pytest.mark.parametrize(
    "body",
    [
        lone('{"url": "https://example.org/LONE"}'),
        lone('{"url": "https://example.org/", "options": {"jq": ".LONE"}}'),
        lone('{"url": "https://example.org/", "LONE": 2}'),
    ],
)
def test_a_lone_surrogate_in_a_fetch_body_is_400(agent, body):
    _, client = agent
    response = client.client.generic(
        "POST", "/v1/fetch", body.encode(), content_type="application/json", headers=client.headers
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert response.json()["details"][0]["field"]


def test_a_surrogate_pair_is_ordinary_text(agent):
    _, client = agent
    body = '{"targets": [{"url": "https://example.org/", "options": {"question": "\\ud83d\\ude00 tides"}}]}'
    assert _post_raw(client, body.encode()).status_code == 202


@pytest.mark.parametrize(
    ("method", "path", "query", "field"),
    [
        ("GET", b"/v1/fetch", b"url=http://127.0.0.1:1/&mode=%ED%A0%80", "mode"),
        ("GET", b"/v1/fetch", b"url=\xff\xfe", "url"),
        ("GET", b"/v1/fetch", b"url=http://[fe80::1%25eth0]/", "url"),
        ("GET", b"/v1/fetch", b"url=http://127.0.0.1:1/&grep=%00", "options.grep"),
        ("GET", b"/v1/batch", b"limit=\xff", "limit"),
        ("GET", b"/v1/batch", b"offset=99999999999999999999999", "offset"),
        ("GET", b"/v1/batch", b"offset=9223372036854775808", "offset"),
        ("GET", b"/v1/batch/\xed\xa0\x80", b"", "job_id"),
        ("GET", b"/v1/batch/\x00", b"", "job_id"),
        ("GET", b"/v1/batch/\xff\xfe", b"", "job_id"),
        ("DELETE", b"/v1/batch/\x00", b"", "job_id"),
        ("GET", b"/v1/batch/" + b"a" * 32 + b"/targets/99999999999999999999999", b"", "idx"),
        ("GET", b"/v1/batch/" + b"a" * 32 + b"/targets/-1", b"", "idx"),
        ("GET", b"/v1/batch/" + b"a" * 32 + b"/targets/\xff", b"", "idx"),
    ],
)
def test_odd_bytes_in_query_strings_and_paths_are_400_naming_the_field(
    agent, method, path, query, field, settings
):
    settings.SIFT_FETCH_ALLOW_CIDRS = ()
    _, client = agent
    auth = client.headers["Authorization"]
    status, content_type, body = _wsgi(method, path, query, HTTP_AUTHORIZATION=auth)
    assert (status, body["code"]) == (400, "invalid_request"), body
    assert content_type.startswith("application/json")
    assert field in body["error"]
    assert body["hint"]


def test_odd_path_parameters_never_reach_the_database(agent, django_assert_max_num_queries):
    _, client = agent
    auth = client.headers["Authorization"]
    # 2 queries for the key; none for the job
    with django_assert_max_num_queries(2):
        status, _, _ = _wsgi("GET", b"/v1/batch/%00", HTTP_AUTHORIZATION=auth)
    assert status == 400


@pytest.mark.parametrize("declared", ["\u00b2", "\u0663", "1e3", "-1", " 5"])
def test_a_content_length_that_is_not_ascii_digits_is_400(agent, declared):
    _, client = agent
    status, _, body = _wsgi(
        "POST", b"/v1/batch", body=b"{}", HTTP_AUTHORIZATION=client.headers["Authorization"],
        CONTENT_LENGTH=declared,
    )  # fmt: skip
    assert (status, body["code"]) == (400, "invalid_request")
    assert not BatchJob.objects.exists()


@pytest.mark.parametrize("content_type", ["application/json; charset=\xff", "\xff\xfe", "text/\x00"])
def test_an_odd_content_type_is_400(agent, content_type):
    _, client = agent
    status, _, body = _wsgi(
        "POST", b"/v1/batch", body=b'{"targets": ["https://example.org/"]}',
        HTTP_AUTHORIZATION=client.headers["Authorization"], CONTENT_TYPE=content_type,
    )  # fmt: skip
    assert status == 400 or (status == 202 and content_type.startswith("application/json;"))
    assert "code" in body or "id" in body
