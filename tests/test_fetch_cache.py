"""The document cache against hostile upstream headers, through /v1/fetch and a real database.

The upstream is a raw TCP server on loopback that writes its header lines byte for byte, so it
can send what no well-behaved server library would: NUL bytes, lone CRs, over-long values.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, cast

import pytest
import urllib3.util.connection
from django.db import connection, models, transaction
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from fetch import cache, guard
from fetch.client import Download
from fetch.models import CachedDocument
from fetch.wire.headers import imf_fixdate

from .factories import LOOPBACK
from .upstream import RawServer, numeric_resolve

PAGE = b"<html><head><title>Tides</title></head><body><p>The tide comes in twice a day.</p></body></html>"


class HostileUpstream:
    """Answers every GET with ``status`` and the raw header lines in ``lines``; logs request heads."""

    def __init__(self) -> None:
        self.status = b"200 OK"
        self.lines: list[bytes] = []
        self.body = PAGE
        self._server = RawServer(self._answer)
        self.requests = self._server.requests
        self.url = f"http://127.0.0.1:{self._server.port}/page"

    def answer(self, *lines: bytes, status: bytes = b"200 OK", body: bytes = PAGE) -> None:
        self.status, self.lines, self.body = status, list(lines), body

    def _answer(self, conn: socket.socket, _: RawServer) -> None:
        framing = [b"Content-Type: text/html", b"Connection: close"]
        if not any(line.lower().startswith(b"content-length:") for line in self.lines):
            framing.append(b"Content-Length: %d" % len(self.body))
        conn.sendall(b"\r\n".join([b"HTTP/1.1 " + self.status, *framing, *self.lines, b"", b""]) + self.body)

    def close(self) -> None:
        self._server.close()


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing leaves the machine, whatever a generated Location points at.

    Host names are not looked up (no DNS query goes out): only numeric hosts resolve. A
    connection to anything but loopback is refused before a packet is sent.
    """

    real_connect = urllib3.util.connection.create_connection

    def connect(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        if not ipaddress.ip_address(address[0].split("%")[0]).is_loopback:
            raise ConnectionRefusedError("tests only connect to loopback")
        return real_connect(address, *args, **kwargs)

    monkeypatch.setattr(guard, "resolve", numeric_resolve)
    monkeypatch.setattr(urllib3.util.connection, "create_connection", connect)


@pytest.fixture
def upstream(settings) -> Iterator[HostileUpstream]:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    # Public addresses pass the guard, as in a deployment, and reach the loopback_only jail.
    settings.SIFT_FETCH_ONLY_ALLOWED = False
    settings.SIFT_CACHE_TTL = 900
    settings.SIFT_BATCH_RETRY_FOR = 600
    server = HostileUpstream()
    yield server
    server.close()


def _conditions(request_head: bytes) -> list[bytes]:
    return [
        line
        for line in request_head.split(b"\r\n")
        if line.lower().startswith((b"if-none-match:", b"if-modified-since:"))
    ]


HOSTILE_VALIDATORS = [
    (b'ETag: "a\x00b"', b"Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\x00"),
    (b'ETag: "a\rb"', b"Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\rX-Evil: 1"),
    (b"ETag: unquoted", b"Last-Modified: yesterday"),
    (b'ETag: "' + b"x" * 10_000 + b'"', b"Last-Modified: " + b"Sun, 06 Nov 1994 08:49:37 GMT" * 10),
    (b'ETag: "\xc3\xa9\xff"', b"Last-Modified: Mon, 31 Feb 2020 00:00:00 GMT"),
    (b'ETag: "one", "two"', b"Last-Modified: Sun, 06 Nov 99999 08:49:37 GMT"),
    (b"ETag: \x7f\x01\x02", b"Last-Modified: \xe2\x80\xae\xff\xfe"),
]


@pytest.mark.parametrize(("etag", "last_modified"), HOSTILE_VALIDATORS)
def test_a_hostile_etag_and_last_modified_never_break_later_fetches_of_the_url(
    agent, upstream: HostileUpstream, settings, etag: bytes, last_modified: bytes
) -> None:
    _, client = agent
    upstream.answer(etag, last_modified)
    first = client.get("/v1/fetch", url=upstream.url)
    settings.SIFT_CACHE_TTL = 0  # the copy is stale at once: the next fetch revalidates it
    second = client.get("/v1/fetch", url=upstream.url)

    assert (first.status_code, second.status_code) == (200, 200)
    assert "twice a day" in second.json()["content"]
    assert len(upstream.requests) == 2
    for line in _conditions(upstream.requests[1]):
        assert b"\x00" not in line
        assert b"\r" not in line


def test_a_valid_etag_and_last_modified_are_kept_and_sent_back(
    agent, upstream: HostileUpstream, settings
) -> None:
    _, client = agent
    upstream.answer(b'ETag: W/"v1"', b"Last-Modified: Sunday, 06-Nov-94 08:49:37 GMT")
    client.get("/v1/fetch", url=upstream.url)
    settings.SIFT_CACHE_TTL = 0
    client.get("/v1/fetch", url=upstream.url)

    row = CachedDocument.objects.get()
    assert (row.etag, row.last_modified) == ('W/"v1"', "Sun, 06 Nov 1994 08:49:37 GMT")
    assert _conditions(upstream.requests[1]) == [
        b'If-None-Match: W/"v1"',
        b"If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT",
    ]


def test_hostile_validators_are_stored_as_absent(agent, upstream: HostileUpstream) -> None:
    _, client = agent
    upstream.answer(b'ETag: "a\rb"', b"Last-Modified: soon")

    assert client.get("/v1/fetch", url=upstream.url).status_code == 200
    row = CachedDocument.objects.get()
    assert (row.etag, row.last_modified) == ("", "")


def test_a_stored_validator_that_does_not_parse_is_not_sent(
    agent, upstream: HostileUpstream, settings
) -> None:
    _, client = agent
    upstream.answer(b'ETag: "v1"')
    client.get("/v1/fetch", url=upstream.url)
    # A row written before validators were checked, or edited by hand.
    CachedDocument.objects.update(etag='"v1"\r\nX-Injected: 1', last_modified="not a date")
    settings.SIFT_CACHE_TTL = 0

    assert client.get("/v1/fetch", url=upstream.url).status_code == 200
    assert _conditions(upstream.requests[1]) == []


def test_every_string_stored_is_clean_and_fits_its_column(db) -> None:
    download = Download(
        url="http://example.test/",
        final_url="http://example.test/\x00\ud800" + "x" * 5000,
        status=200,
        headers={"etag": '"ok"', "last-modified": "Sun, 06 Nov 1994 08:49:37 GMT"},
        content_type="text/" + "a\x00" * 300,
        charset="utf-8\x00\udfff" + "z" * 100,
        body=b"body",
        elapsed_ms=1,
    )

    cache.store("fleet", "http://example.test/\ud83d", download)

    row = CachedDocument.objects.get()
    for field in ("url", "final_url", "content_type", "charset", "etag", "last_modified"):
        value = getattr(row, field)
        assert "\x00" not in value
        value.encode("utf-8")  # no lone surrogate
        size = cast(models.Field, CachedDocument._meta.get_field(field)).max_length
        assert size is None or len(value) <= size
    assert row.etag == '"ok"'
    assert cache.lookup("fleet", "http://example.test/\ud83d") == row


# Any header value, through the whole service: never a 500 --------------------------------------

header_values = st.binary(max_size=200).filter(lambda raw: b"\n" not in raw and b"\r" not in raw)
DOCUMENTED = (200, 403, 415, 422, 429, 502, 504)  # the outcome table; never 500
NAMES = [b"ETag", b"Last-Modified", b"Content-Type", b"Content-Length", b"Retry-After", b"Location"]


@hypothesis_settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from(NAMES),
    value=header_values,
    status=st.sampled_from([b"200 OK", b"302 Found", b"429 Too Many"]),
)
def test_any_upstream_header_value_never_gives_a_500(
    agent, upstream: HostileUpstream, settings, name: bytes, value: bytes, status: bytes
) -> None:
    _, client = agent
    settings.SIFT_CACHE_TTL = 0  # every example goes upstream, revalidating what the last one stored
    upstream.answer(name + b": " + value, status=status)

    response = client.get("/v1/fetch", url=upstream.url)

    assert response.status_code in DOCUMENTED, response.content
    body = response.json()
    if response.status_code == 429:
        assert 1 <= body["retry_after"] <= 600


@pytest.mark.parametrize(
    ("lines", "status", "code"),
    [
        ([b"Location: http://[::1"], b"302 Found", "upstream_4xx"),
        ([b"Location: /a\x00b"], b"301 Moved", "upstream_4xx"),
        ([b"Location: http://93.184.215.14/"], b"302 Found", "upstream_5xx"),  # refused by the jail
        ([b"Location: //example.com/"], b"302 Found", "upstream_5xx"),  # never looked up
        ([b"Retry-After: 99999999999999999999"], b"429 Slow Down", "busy"),
        ([b"Retry-After: \xc2\xb2"], b"503 Busy", "busy"),
        ([b"Content-Length: \xc2\xb2"], b"200 OK", None),
        ([b"Content-Length: 10, 11"], b"200 OK", None),
        ([b"Content-Type: text/html; charset=rot13"], b"200 OK", None),
        ([b"Content-Type: \x00/\x00; charset=punycode"], b"200 OK", None),
    ],
)
def test_hostile_headers_end_as_a_documented_answer(
    agent, upstream: HostileUpstream, lines: list[bytes], status: bytes, code: str | None
) -> None:
    _, client = agent
    upstream.answer(*lines, status=status)

    response = client.get("/v1/fetch", url=upstream.url)

    assert response.status_code in DOCUMENTED, response.content
    if code is None:
        assert response.status_code in (200, 502), response.content
    else:
        assert response.json()["code"] == code
    if code == "busy":
        assert 1 <= response.json()["retry_after"] <= 600


def test_a_retry_after_date_far_ahead_is_clamped_to_retry_for(agent, upstream: HostileUpstream) -> None:
    _, client = agent
    later = imf_fixdate(timezone.now() + timedelta(days=3)).encode()
    upstream.answer(b"Retry-After: " + later, status=b"429 Too Many")

    response = client.get("/v1/fetch", url=upstream.url)

    assert (response.status_code, response.json()["retry_after"], response["Retry-After"]) == (
        429,
        600,
        "600",
    )


@pytest.mark.postgres
def test_a_copy_the_database_refuses_is_skipped_and_the_fetch_still_answers(
    agent, upstream: HostileUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("only PostgreSQL refuses a NUL in a text column")
    real_row = cache._row

    def row_with_nul(url: str, download: Download) -> dict[str, object]:
        return {**real_row(url, download), "final_url": "http://example.test/\x00"}  # as before cleaning

    monkeypatch.setattr(cache, "_row", row_with_nul)
    _, client = agent
    upstream.answer()

    response = client.get("/v1/fetch", url=upstream.url)

    assert response.status_code == 200
    assert "twice a day" in response.json()["content"]
    assert not CachedDocument.objects.exists()


def _download(body: bytes) -> Download:
    return Download(
        url="http://127.0.0.1/a",
        final_url="http://127.0.0.1/a",
        status=200,
        headers={"etag": '"v1"'},
        content_type="text/html",
        charset="utf-8",
        body=body,
        elapsed_ms=1,
    )


def test_storing_a_url_again_replaces_its_one_copy(db):
    cache.store("fleet", "http://127.0.0.1/a", _download(b"first"))
    cache.store("fleet", "http://127.0.0.1/a", _download(b"second copy"))
    copy = CachedDocument.objects.get()
    assert (bytes(copy.body), copy.n_bytes, copy.etag) == (b"second copy", 11, '"v1"')
    assert cache.lookup("fleet", "http://127.0.0.1/a") == copy


def test_a_copy_over_the_budget_is_evicted_at_the_next_check(db, settings):
    settings.SIFT_CACHE_MAX_BYTES = 100
    for name in ("a", "b", "c"):
        cache.store("fleet", f"http://127.0.0.1/{name}", _download(name.encode() * 40))
    assert sorted(CachedDocument.objects.values_list("url", flat=True)) == [
        "http://127.0.0.1/b",
        "http://127.0.0.1/c",
    ]


def test_a_copy_refused_inside_a_callers_transaction_leaves_the_callers_work_alone(db, monkeypatch):
    real_row = cache._row
    monkeypatch.setattr(cache, "_row", lambda url, download: {**real_row(url, download), "status": -1})
    with transaction.atomic():
        cache.store("fleet", "http://127.0.0.1/a", _download(b"refused"))  # a negative status: refused
        cache.store("fleet", "http://127.0.0.1/b", _download(b"refused too"))
        assert not CachedDocument.objects.exists()  # the transaction still answers
