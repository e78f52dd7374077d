"""The one way out to upstream sites (docs/fetch-client.md): ``download(url) -> Download``.

Every hop goes through ``guard.check_url`` and then to one of the addresses the guard vetted:
urllib3 is handed the IP address as the host, while ``server_hostname`` carries the URL's host
name, so TLS still sends it (SNI) and verifies the certificate against it. Redirects are
followed here, never by the library, so each hop is checked again.

HTTP statuses are returned, not raised; the caller maps them. The only exception that leaves
this module is ``FetchError``. See docs/fetch-client.md for the outcome choices.
"""

from __future__ import annotations

import functools
import http.client
import re
import ssl
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import certifi
from django.conf import settings
from urllib3 import HTTPConnectionPool, Timeout
from urllib3.exceptions import ConnectTimeoutError, HTTPError, NewConnectionError, ReadTimeoutError, SSLError
from urllib3.response import BaseHTTPResponse

from fetch import guard
from fetch.errors import FetchError
from fetch.outcomes import Outcome
from fetch.wire import decoding
from fetch.wire import headers as parse
from fetch.wire.deadline import Deadline, HTTPPool, HTTPSPool

USER_AGENT = "sift/0.1 (a self-hosted web reader for AI agents)"
ACCEPT = "text/html,application/xhtml+xml,application/json,application/pdf,text/plain;q=0.9,*/*;q=0.8"
MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
CA_BUNDLE = certifi.where()  # read at each download, so tests can trust their own CA

_READ_SIZE = 64 * 1024
_OWNED_HEADERS = frozenset(
    {"host", "accept-encoding", "connection", "content-length", "transfer-encoding", "te"}
)
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
# Line breaks and NUL could split or cut the request; anything past U+00FF cannot be sent at all.
_HEADER_VALUE_FORBIDDEN = re.compile(r"[\r\n\x00\u0100-\U0010ffff]")
_UNREACHABLE_HINT = "The site could not be reached; check the host name or retry later."
_LIBRARY_ERRORS = (HTTPError, http.client.HTTPException, OSError)


@dataclass(frozen=True)
class Download:
    """What the upstream answered: any status, the decompressed body and its declared type."""

    url: str
    final_url: str
    status: int
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
    content_type: str  # declared media type, lower-cased, without parameters; "" when none
    charset: str | None
    body: bytes
    elapsed_ms: int


@functools.lru_cache(maxsize=4)
def _tls_context(ca_bundle: str) -> ssl.SSLContext:
    # Verifies the chain and the host name. The handshake needs no watching: Python bounds a
    # whole handshake by the socket timeout, which is the connect timeout capped by the deadline.
    return ssl.create_default_context(cafile=ca_bundle)


def _pool(destination: guard.Destination, address: str, deadline: Deadline) -> HTTPConnectionPool:
    left = max(deadline.remaining(), 0.01)  # urllib3 refuses a zero timeout
    timeout = Timeout(connect=min(float(settings.SIFT_FETCH_CONNECT_TIMEOUT), left), read=left)
    if destination.scheme == "https":
        return HTTPSPool(
            address,
            destination.port,
            timeout=timeout,
            maxsize=1,
            retries=False,
            server_hostname=destination.host,
            ssl_context=_tls_context(CA_BUNDLE),
        )
    return HTTPPool(address, destination.port, timeout=timeout, maxsize=1, retries=False)


def _urlopen(
    destination: guard.Destination,
    address: str,
    headers: dict[str, str],
    deadline: Deadline,
    body: bytes | None = None,
) -> BaseHTTPResponse:
    deadline.check()
    pool = _pool(destination, address, deadline)
    return pool.urlopen(
        "GET" if body is None else "POST",
        destination.path,
        body=body,
        headers=headers,
        redirect=False,
        retries=False,
        assert_same_host=False,
        preload_content=False,
        decode_content=False,
    )


def _connect_first(
    destination: guard.Destination, headers: dict[str, str], deadline: Deadline, body: bytes | None = None
) -> BaseHTTPResponse:
    """Send the request to the first vetted address that accepts a connection."""
    *others, last = destination.addresses
    for address in others:
        try:
            return _urlopen(destination, address, headers, deadline, body)
        except ConnectTimeoutError:  # NewConnectionError included: refused or unreachable
            continue
    return _urlopen(destination, last, headers, deadline, body)


@contextmanager
def _exchange(
    destination: guard.Destination, headers: dict[str, str], deadline: Deadline, body: bytes | None = None
) -> Iterator[BaseHTTPResponse]:
    response = _connect_first(destination, headers, deadline, body)
    try:
        yield response
    finally:
        deadline.release()
        response.close()


def _caller_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    checked = dict(headers or {})
    for name, value in checked.items():
        if not _HEADER_NAME.match(name) or _HEADER_VALUE_FORBIDDEN.search(value):
            raise FetchError(
                Outcome.INVALID_REQUEST,
                "a request header is malformed",
                "Header names are tokens; values hold no line breaks, NUL bytes or characters past U+00FF.",
            )
    return checked


def _request_headers(
    destination: guard.Destination, extra: dict[str, str], same_origin: bool
) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": ACCEPT}
    for name, value in extra.items():
        key = name.lower()
        if key in _OWNED_HEADERS or (key in _CREDENTIAL_HEADERS and not same_origin):
            continue
        headers = {k: v for k, v in headers.items() if k.lower() != key}
        headers[name] = value
    headers["Host"] = destination.host_header
    headers["Accept-Encoding"] = "gzip, deflate"
    return headers


def _read_raw(response: BaseHTTPResponse, limit: int, deadline: Deadline) -> bytes:
    declared = parse.content_length(response.headers.get("content-length"))
    if declared is not None and declared > limit:
        raise decoding.too_long()
    body = bytearray()
    while chunk := response.read1(_READ_SIZE):
        body += chunk
        if len(body) > limit:
            raise decoding.too_long()
        deadline.check()
    deadline.check()
    return bytes(body)


def _lower_headers(response: BaseHTTPResponse) -> dict[str, str]:
    return {name.lower(): response.headers[name] for name in response.headers}


@dataclass(frozen=True)
class _Answer:
    final_url: str
    status: int
    headers: dict[str, str]
    body: bytes


def _check_hop(url: str, hop: int) -> guard.Destination:
    try:
        return guard.check_url(url)
    except FetchError as exc:
        if hop == 0 or exc.outcome != Outcome.BLOCKED:
            raise
        raise FetchError(
            Outcome.BLOCKED, f"the site redirected to a refused URL: {exc.message}", exc.hint
        ) from exc


def _receive(
    url: str, response: BaseHTTPResponse, deadline: Deadline, limit: int, wire_limit: int | None
) -> _Answer:
    received = _lower_headers(response)
    codings = decoding.codings(received)
    wire = decoding.slack(limit) if codings else limit
    raw = _read_raw(response, wire if wire_limit is None else min(wire, wire_limit), deadline)
    return _Answer(url, response.status, received, decoding.decode(raw, codings, limit, deadline))


def _follow(
    url: str, extra: dict[str, str], deadline: Deadline, limit: int, wire_limit: int | None = None
) -> _Answer:
    current, origin = url, None
    for hop in range(MAX_REDIRECTS + 1):
        destination = _check_hop(current, hop)
        origin = origin or destination.origin
        sent = _request_headers(destination, extra, same_origin=destination.origin == origin)
        with _exchange(destination, sent, deadline) as response:
            # A Location that does not parse is absent: the 3xx answer is then the answer.
            target = (
                parse.location(response.headers.get("location"), current)
                if response.status in REDIRECT_STATUSES
                else None
            )
            if target is None:
                return _receive(current, response, deadline, limit, wire_limit)
        current = target
    raise FetchError(
        Outcome.BLOCKED,
        f"the site redirected more than {MAX_REDIRECTS} times",
        "Fetch the final URL directly, or check the URL for a redirect loop.",
    )


def _library_failure(exc: Exception, deadline: Deadline) -> FetchError:
    """Turn a urllib3, http.client, ssl or socket error into the outcome an agent can act on."""
    if deadline.expired:
        return deadline.error()
    if isinstance(exc, NewConnectionError):  # before ConnectTimeoutError: it is a subclass
        return FetchError(
            Outcome.UPSTREAM_5XX, "the connection to the site was refused or failed", _UNREACHABLE_HINT
        )
    if isinstance(exc, ConnectTimeoutError):
        seconds = min(float(settings.SIFT_FETCH_CONNECT_TIMEOUT), deadline.seconds)
        return FetchError(
            Outcome.TIMEOUT,
            f"the site did not accept a connection within {seconds:g} s",
            "The site is down or slow; retry later.",
        )
    if isinstance(exc, ReadTimeoutError | TimeoutError):
        return FetchError(
            Outcome.TIMEOUT, "the site stopped answering", "The site is slow or stalled; retry later."
        )
    if isinstance(exc, SSLError | ssl.SSLError | ssl.CertificateError):
        return FetchError(
            Outcome.UPSTREAM_5XX,
            "the secure connection to the site failed (TLS or certificate error)",
            "The site's certificate may be invalid for this host name or expired; "
            "check the host name or retry later.",
        )
    return FetchError(
        Outcome.UPSTREAM_5XX, "the connection to the site failed or broke off", _UNREACHABLE_HINT
    )


def download(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
    max_bytes: int | None = None,
    max_wire_bytes: int | None = None,
) -> Download:
    """GET ``url`` through the guard, following up to five redirects, within the deadline.

    ``timeout`` and ``max_bytes`` default to ``SIFT_FETCH_TIMEOUT`` and ``SIFT_FETCH_MAX_BYTES``;
    robots.txt asks for less, and a fetch that waited for its host's turn has less time left.
    ``max_bytes`` counts the body once its content codings are undone; ``max_wire_bytes``, if
    given, also caps the bytes read off the wire (a sitemap: its wire and uncompressed caps differ).

    Raises ``FetchError`` only: ``blocked``, ``timeout``, ``too_long``, ``unsupported``,
    ``upstream_5xx`` (no upstream status: the site could not be reached or sent garbage) and
    ``invalid_request`` (malformed ``headers``). Any HTTP status is returned, not raised.
    """
    started = time.monotonic()
    extra = _caller_headers(headers)
    seconds = float(settings.SIFT_FETCH_TIMEOUT) if timeout is None else timeout
    limit = int(settings.SIFT_FETCH_MAX_BYTES) if max_bytes is None else max_bytes
    with Deadline(seconds) as deadline:
        try:
            answer = _follow(url, extra, deadline, limit, max_wire_bytes)
        except _LIBRARY_ERRORS as exc:
            raise _library_failure(exc, deadline) from exc
    content_type, charset = parse.content_type(answer.headers.get("content-type"))
    return Download(
        url=url,
        final_url=answer.final_url,
        status=answer.status,
        headers=answer.headers,
        content_type=content_type,
        charset=charset,
        body=answer.body,
        elapsed_ms=int((time.monotonic() - started) * 1000),
    )


def post(url: str, body: bytes, *, headers: Mapping[str, str], timeout: float) -> int:
    """POST ``body`` to ``url`` through the guard and return the HTTP status (webhooks).

    The same guard and pinned connection as ``download``, checked at every call; no redirect
    is followed (a 3xx is the answer); the answer's body is never read; ``timeout`` bounds the
    whole exchange. Raises ``FetchError`` only, as ``download`` does.
    """
    extra = _caller_headers(headers)
    with Deadline(timeout) as deadline:
        try:
            destination = guard.check_url(url)
            sent = {"User-Agent": USER_AGENT, **extra, "Host": destination.host_header}
            with _exchange(destination, sent, deadline, body) as response:
                return int(response.status)
        except _LIBRARY_ERRORS as exc:
            raise _library_failure(exc, deadline) from exc
