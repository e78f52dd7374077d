"""The HTTP client (docs/fetch-client.md): pinned connections, redirects, limits and outcomes.

Every upstream is a server on loopback. A jail around urllib3's ``create_connection`` sends any
connection to a non-loopback address to the local test server instead (recording where it
was meant to go), so a guard that let a private address through would show up in the local
server's request log, and no packet ever leaves the machine.
"""

from __future__ import annotations

import gzip
import ipaddress
import socket
import ssl
import struct
import subprocess
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import certifi
import pytest
import urllib3.util.connection
from pytest_django.fixtures import Settings
from pytest_httpserver import HTTPServer
from werkzeug import Response

from fetch import client, guard
from fetch.errors import FetchError

from .factories import LOOPBACK
from .upstream import RawServer, resolver_for

PUBLIC = "93.184.215.14"  # a global address; the jail turns it into the local test server
CAP = 1000


# Harness ------------------------------------------------------------------------------------


class Jail:
    """Keeps every connection on loopback; non-loopback destinations go to 127.0.0.1."""

    def __init__(self) -> None:
        self.detoured: list[str] = []
        self._real = urllib3.util.connection.create_connection

    def create_connection(self, address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        host, port = address
        if not ipaddress.ip_address(host.split("%")[0]).is_loopback:
            self.detoured.append(host)
            host = "127.0.0.1"
        return self._real((host, port), *args, **kwargs)


@pytest.fixture(autouse=True)
def jail(monkeypatch: pytest.MonkeyPatch) -> Jail:
    cell = Jail()
    monkeypatch.setattr(urllib3.util.connection, "create_connection", cell.create_connection)
    return cell


@pytest.fixture(autouse=True)
def fetch_settings(settings: Settings) -> Settings:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_FETCH_ONLY_ALLOWED = False  # the jail keeps every connection on loopback
    settings.SIFT_FETCH_MAX_BYTES = 20 * 2**20
    settings.SIFT_FETCH_TIMEOUT = 10.0
    settings.SIFT_FETCH_CONNECT_TIMEOUT = 5.0
    return settings


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Host names the guard resolves without DNS; numeric hosts and localhost resolve as usual."""
    table: dict[str, list[str]] = {}
    monkeypatch.setattr(guard, "resolve", resolver_for(table))
    return table


@pytest.fixture
def server(httpserver_ipv4: HTTPServer, names: dict[str, list[str]], settings: Settings) -> HTTPServer:
    """The local upstream, also reachable as ``public.test`` (through the jail) on its port."""
    names["public.test"] = [PUBLIC]
    settings.SIFT_FETCH_ALLOW_PORTS = frozenset({80, 443, 8080, 8443, httpserver_ipv4.port})
    return httpserver_ipv4


def strict(settings: Settings, port: int) -> None:
    """No allowed networks, and the test server's port allowed: only the address can refuse."""
    settings.SIFT_FETCH_ALLOW_CIDRS = ()
    settings.SIFT_FETCH_ALLOW_PORTS = frozenset({port})


def fetch_error(url: str, **kwargs: Any) -> FetchError:
    with pytest.raises(FetchError) as caught:
        client.download(url, **kwargs)
    return caught.value


@pytest.fixture
def raw_server(names: dict[str, list[str]]) -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(handler: Callable[[socket.socket, RawServer], None], *, head: bool = True) -> RawServer:
        servers.append(RawServer(handler, head=head))
        return servers[-1]

    yield start
    for each in servers:
        each.close()


def answer(
    status: str, headers: dict[str, str], body: bytes = b""
) -> Callable[[socket.socket, RawServer], None]:
    def handler(conn: socket.socket, _: RawServer) -> None:
        lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
        conn.sendall("\r\n".join(lines).encode() + body)

    return handler


def drip(prefix: bytes, *, at_once: bytes = b"") -> Callable[[socket.socket, RawServer], None]:
    """Send ``at_once``, then ``prefix`` one byte a second, then spaces until the client leaves."""

    def handler(conn: socket.socket, server: RawServer) -> None:
        conn.sendall(at_once)
        for index in range(60):
            if server.stopped.is_set():
                return
            conn.sendall(prefix[index : index + 1] or b" ")
            time.sleep(1)

    return handler


# Successful downloads -----------------------------------------------------------------------


def test_download_returns_status_headers_type_charset_and_body(server: HTTPServer) -> None:
    server.expect_request("/page").respond_with_data(
        "<p>hello</p>", content_type='Text/HTML; Charset="UTF-8"', headers={"X-Thing": "1"}
    )
    url = server.url_for("/page")

    result = client.download(url)

    assert (result.url, result.final_url, result.status) == (url, url, 200)
    assert result.content_type == "text/html"
    assert result.charset == "utf-8"
    assert result.body == b"<p>hello</p>"
    assert result.headers["x-thing"] == "1"
    assert result.elapsed_ms >= 0


@pytest.mark.parametrize("status", [304, 404, 429, 500, 503])
def test_http_error_status_is_returned_not_raised(server: HTTPServer, status: int) -> None:
    server.expect_request("/").respond_with_data("nope", status=status, headers={"Retry-After": "7"})

    result = client.download(server.url_for("/"))

    assert result.status == status
    assert result.headers["retry-after"] == "7"


def test_request_carries_user_agent_accept_encoding_and_host(server: HTTPServer) -> None:
    server.expect_request("/").respond_with_data("ok")

    client.download(f"http://public.test:{server.port}/")

    request = server.log[0][0]
    assert request.headers["User-Agent"].startswith("sift/")
    assert request.headers["Accept-Encoding"] == "gzip, deflate"
    assert request.headers["Host"] == f"public.test:{server.port}"


def test_caller_headers_are_sent_but_host_stays_the_urls(server: HTTPServer) -> None:
    server.expect_request("/").respond_with_data("ok")

    client.download(
        server.url_for("/"), headers={"If-None-Match": '"v1"', "host": "evil.test", "user-agent": "x"}
    )

    request = server.log[0][0]
    assert request.headers["If-None-Match"] == '"v1"'
    assert request.headers["Host"] == f"127.0.0.1:{server.port}"
    assert request.headers["User-Agent"] == "x"


@pytest.mark.parametrize("value", ["a\r\nHost: other", "a\x00b", '"snow\u2603"', "\ud800"])
def test_malformed_caller_header_is_invalid_request(server: HTTPServer, value: str) -> None:
    error = fetch_error(server.url_for("/"), headers={"If-None-Match": value})

    assert error.outcome == "invalid_request"
    assert server.log == []


def test_next_vetted_address_is_tried_when_the_first_refuses(
    server: HTTPServer, names: dict[str, list[str]]
) -> None:
    names["two.test"] = ["127.0.0.2", "127.0.0.1"]  # nothing listens on 127.0.0.2
    server.expect_request("/").respond_with_data("second")

    assert client.download(f"http://two.test:{server.port}/").body == b"second"


def gzip_body(data: bytes) -> bytes:
    return gzip.compress(data)


def zlib_body(data: bytes) -> bytes:
    return zlib.compress(data)


def raw_deflate_body(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-15)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip_body),
        ("x-gzip", gzip_body),
        ("deflate", zlib_body),
        ("deflate", raw_deflate_body),
        ("gzip, deflate", lambda data: zlib_body(gzip_body(data))),
        ("identity, gzip", gzip_body),
    ],
)
def test_compressed_body_is_decompressed(
    server: HTTPServer, encoding: str, encode: Callable[[bytes], bytes]
) -> None:
    text = b"sift reads the web. " * 200
    server.expect_request("/").respond_with_data(encode(text), headers={"Content-Encoding": encoding})

    assert client.download(server.url_for("/")).body == text


def test_gzip_body_of_several_members_is_decompressed_whole(server: HTTPServer) -> None:
    server.expect_request("/").respond_with_data(
        gzip_body(b"one ") + gzip_body(b"two"), headers={"Content-Encoding": "gzip"}
    )

    assert client.download(server.url_for("/")).body == b"one two"


def test_more_than_two_content_encodings_is_unsupported(server: HTTPServer) -> None:
    body = gzip_body(gzip_body(gzip_body(b"deep")))
    server.expect_request("/").respond_with_data(body, headers={"Content-Encoding": "gzip, gzip, gzip"})

    error = fetch_error(server.url_for("/"))

    assert error.outcome == "unsupported"
    assert "3 content encodings" in error.message


def test_unknown_content_encoding_is_unsupported(server: HTTPServer) -> None:
    server.expect_request("/").respond_with_data(b"\x0b\x02\x80hi\x03", headers={"Content-Encoding": "br"})

    assert fetch_error(server.url_for("/")).outcome == "unsupported"


def test_corrupt_gzip_body_is_upstream_5xx(server: HTTPServer) -> None:
    server.expect_request("/").respond_with_data(b"this is not gzip", headers={"Content-Encoding": "gzip"})

    error = fetch_error(server.url_for("/"))

    assert error.outcome == "upstream_5xx"
    assert error.upstream_status is None


# Redirects ------------------------------------------------------------------------------------


def redirect_chain(server: HTTPServer, hops: int) -> None:
    for index in range(hops):
        server.expect_request(f"/r{index}").respond_with_data(
            "", status=302, headers={"Location": f"r{index + 1}"}
        )
    server.expect_request(f"/r{hops}").respond_with_data("landed")


def requested_paths(server: HTTPServer) -> list[str]:
    return [request.path for request, _ in server.log]


def test_five_redirects_are_followed_to_the_final_url(server: HTTPServer) -> None:
    redirect_chain(server, 5)

    result = client.download(server.url_for("/r0"))

    assert result.body == b"landed"
    assert result.final_url == server.url_for("/r5")
    assert requested_paths(server) == [f"/r{i}" for i in range(6)]


def test_sixth_redirect_is_blocked_and_never_followed(server: HTTPServer) -> None:
    redirect_chain(server, 6)

    error = fetch_error(server.url_for("/r0"))

    assert error.outcome == "blocked"
    assert "more than 5" in error.message
    assert "/r6" not in requested_paths(server)


@pytest.mark.parametrize("status", [301, 303, 307, 308])
def test_every_redirect_status_is_followed(server: HTTPServer, status: int) -> None:
    server.expect_request("/old").respond_with_data("", status=status, headers={"Location": "/new"})
    server.expect_request("/new").respond_with_data("new")

    assert client.download(server.url_for("/old")).body == b"new"


@pytest.mark.parametrize(
    "location", ["file:///etc/passwd", "gopher://127.0.0.1:70/_stats", "ftp://127.0.0.1/"]
)
def test_redirect_to_another_scheme_is_blocked(server: HTTPServer, location: str) -> None:
    server.expect_request("/").respond_with_data("", status=302, headers={"Location": location})

    error = fetch_error(server.url_for("/"))

    assert error.outcome == "blocked"
    assert "redirected" in error.message
    assert "scheme" in error.message
    assert requested_paths(server) == ["/"]


def test_redirect_from_a_public_site_to_loopback_is_blocked(server: HTTPServer, settings: Settings) -> None:
    strict(settings, server.port)
    server.expect_request("/start").respond_with_data(
        "", status=302, headers={"Location": f"http://127.0.0.1:{server.port}/secret"}
    )

    error = fetch_error(f"http://public.test:{server.port}/start")

    assert error.outcome == "blocked"
    assert "loopback" in error.message
    assert requested_paths(server) == ["/start"]


def test_redirect_to_loopback_is_followed_when_loopback_is_allowed(server: HTTPServer) -> None:
    server.expect_request("/start").respond_with_data(
        "", status=302, headers={"Location": f"http://127.0.0.1:{server.port}/secret"}
    )
    server.expect_request("/secret").respond_with_data("secret")

    assert client.download(f"http://public.test:{server.port}/start").body == b"secret"


def test_redirect_to_cloud_metadata_is_blocked(server: HTTPServer, settings: Settings, jail: Jail) -> None:
    strict(settings, server.port)
    server.expect_request("/").respond_with_data(
        "", status=301, headers={"Location": f"http://169.254.169.254:{server.port}/latest/meta-data/"}
    )

    error = fetch_error(f"http://public.test:{server.port}/")

    assert error.outcome == "blocked"
    assert "link-local" in error.message
    assert requested_paths(server) == ["/"]
    assert jail.detoured == [PUBLIC]


def test_credentials_are_not_carried_to_another_origin(server: HTTPServer) -> None:
    server.expect_request("/a").respond_with_data(
        "", status=302, headers={"Location": f"http://public.test:{server.port}/b"}
    )
    server.expect_request("/b").respond_with_data("b")

    client.download(server.url_for("/a"), headers={"Authorization": "Bearer s3cret", "X-Keep": "1"})

    first, second = (request for request, _ in server.log)
    assert first.headers.get("Authorization") == "Bearer s3cret"
    assert second.headers.get("Authorization") is None
    assert second.headers.get("X-Keep") == "1"


# SSRF: refused before any connection ----------------------------------------------------------

V4_LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.1",
    "0x7f.1",
    "2130706433",
    "0177.0.0.1",
    "localhost",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
]


@pytest.mark.parametrize("host", V4_LOOPBACK_SPELLINGS)
def test_loopback_in_any_spelling_is_blocked_and_never_reached(
    server: HTTPServer, settings: Settings, jail: Jail, host: str
) -> None:
    strict(settings, server.port)
    server.expect_request("/").respond_with_data("secret")

    error = fetch_error(f"http://{host}:{server.port}/")

    assert error.outcome == "blocked"
    assert "loopback" in error.message
    assert server.log == []
    assert jail.detoured == []


@pytest.mark.parametrize("host", V4_LOOPBACK_SPELLINGS)
def test_each_loopback_spelling_does_reach_the_server_once_loopback_is_allowed(
    server: HTTPServer, host: str
) -> None:
    server.expect_request("/").respond_with_data("secret")

    assert client.download(f"http://{host}:{server.port}/").body == b"secret"


@pytest.fixture
def ipv6_server(request: pytest.FixtureRequest) -> HTTPServer:
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    server: HTTPServer = request.getfixturevalue("httpserver_ipv6")
    return server


def test_ipv6_loopback_is_blocked_and_never_reached(
    ipv6_server: HTTPServer, settings: Settings, names: dict[str, list[str]]
) -> None:
    httpserver_ipv6 = ipv6_server
    strict(settings, httpserver_ipv6.port)
    httpserver_ipv6.expect_request("/").respond_with_data("secret")
    url = f"http://[::1]:{httpserver_ipv6.port}/"

    assert fetch_error(url).outcome == "blocked"
    assert httpserver_ipv6.log == []
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    assert client.download(url).body == b"secret"


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("0.0.0.0", "unspecified"),
        ("10.1.2.3", "private"),
        ("172.16.5.4", "private"),
        ("192.168.0.1", "private"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("169.254.169.254", "link-local"),
        ("198.18.0.1", "benchmarking"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("[64:ff9b::7f00:1]", "loopback, inside a NAT64 address"),
        ("[64:ff9b:1::7f00:1]", "loopback, inside a NAT64 address"),
        ("[2002:7f00:1::1]", "loopback, inside a 6to4 address"),
        ("[::ffff:a00:1]", "private"),
        ("[fd00::1]", "private"),
        ("[fe80::1]", "link-local"),
    ],
)
def test_non_public_address_is_blocked_and_never_reached(
    server: HTTPServer, settings: Settings, jail: Jail, host: str, reason: str
) -> None:
    strict(settings, server.port)
    server.expect_request("/").respond_with_data("secret")

    error = fetch_error(f"http://{host}:{server.port}/")

    assert error.outcome == "blocked"
    assert reason in error.message
    assert reason in error.hint
    assert server.log == []
    assert jail.detoured == []


def test_public_address_reaches_the_jailed_server_so_a_leak_would_show(
    server: HTTPServer, settings: Settings, jail: Jail
) -> None:
    strict(settings, server.port)
    server.expect_request("/").respond_with_data("public")

    assert client.download(f"http://{PUBLIC}:{server.port}/").body == b"public"
    assert jail.detoured == [PUBLIC]


@pytest.mark.parametrize(
    "answers", [["10.0.0.7"], [PUBLIC, "10.0.0.7"], ["10.0.0.7", PUBLIC], [PUBLIC, "127.0.0.1"]]
)
def test_name_with_any_private_address_is_blocked_and_never_reached(
    server: HTTPServer, settings: Settings, names: dict[str, list[str]], jail: Jail, answers: list[str]
) -> None:
    strict(settings, server.port)
    names["mixed.test"] = answers
    server.expect_request("/").respond_with_data("secret")

    error = fetch_error(f"http://mixed.test:{server.port}/")

    assert error.outcome == "blocked"
    assert "mixed.test" not in error.message + error.hint
    assert "10.0.0.7" not in error.message + error.hint
    assert server.log == []
    assert jail.detoured == []


def test_port_not_allowed_is_blocked_and_never_reached(server: HTTPServer, settings: Settings) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = ()
    settings.SIFT_FETCH_ALLOW_PORTS = frozenset({80, 443})
    server.expect_request("/").respond_with_data("secret")

    error = fetch_error(f"http://public.test:{server.port}/")

    assert error.outcome == "blocked"
    assert f"port {server.port}" in error.message
    assert server.log == []
    settings.SIFT_FETCH_ALLOW_PORTS = frozenset({server.port})
    assert client.download(f"http://public.test:{server.port}/").body == b"secret"


# Limits -------------------------------------------------------------------------------------


@pytest.fixture
def small_cap(settings: Settings) -> int:
    settings.SIFT_FETCH_MAX_BYTES = CAP
    return CAP


def test_body_over_the_cap_with_truthful_content_length_is_too_long(
    server: HTTPServer, small_cap: int
) -> None:
    server.expect_request("/").respond_with_data(b"x" * (small_cap + 1))

    error = fetch_error(server.url_for("/"))

    assert error.outcome == "too_long"
    assert str(small_cap) in error.message


def test_body_at_the_cap_is_accepted(server: HTTPServer, small_cap: int) -> None:
    server.expect_request("/").respond_with_data(b"x" * small_cap)

    assert len(client.download(server.url_for("/")).body) == small_cap


@pytest.mark.parametrize("framing", ["close", "chunked"])
def test_body_over_the_cap_without_content_length_is_too_long(
    raw_server: Callable[..., RawServer], small_cap: int, framing: str
) -> None:
    payload = b"y" * (small_cap * 5)
    if framing == "chunked":
        pieces = [payload[i : i + 100] for i in range(0, len(payload), 100)]
        body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in [*pieces, b""])
        upstream = raw_server(answer("200 OK", {"Transfer-Encoding": "chunked"}, body))
    else:  # the body ends when the connection does
        upstream = raw_server(answer("200 OK", {"Connection": "close"}, payload))

    assert fetch_error(f"http://127.0.0.1:{upstream.port}/").outcome == "too_long"


def test_content_length_shorter_than_the_body_is_read_as_declared(
    raw_server: Callable[..., RawServer], small_cap: int
) -> None:
    upstream = raw_server(answer("200 OK", {"Content-Length": "10"}, b"y" * (small_cap * 5)))

    assert client.download(f"http://127.0.0.1:{upstream.port}/").body == b"y" * 10


def test_size_is_counted_after_decompression(server: HTTPServer, small_cap: int) -> None:
    server.expect_request("/fits").respond_with_data(
        gzip_body(b"z" * small_cap), headers={"Content-Encoding": "gzip"}
    )
    server.expect_request("/over").respond_with_data(
        gzip_body(b"z" * (small_cap + 1)), headers={"Content-Encoding": "gzip"}
    )

    assert len(client.download(server.url_for("/fits")).body) == small_cap
    assert fetch_error(server.url_for("/over")).outcome == "too_long"


@pytest.mark.parametrize("layers", [["gzip"], ["deflate"], ["gzip", "gzip"]])
def test_compression_bomb_is_too_long(server: HTTPServer, settings: Settings, layers: list[str]) -> None:
    settings.SIFT_FETCH_MAX_BYTES = 2**20
    body = b"\0" * (64 * 2**20)
    for layer in layers:
        body = gzip_body(body) if layer == "gzip" else zlib_body(body)
    assert len(body) < 2**20 // 4  # what arrives is small; what it expands to is not
    server.expect_request("/").respond_with_data(body, headers={"Content-Encoding": ", ".join(layers)})

    assert fetch_error(server.url_for("/")).outcome == "too_long"


def test_compression_bomb_is_refused_without_inflating_it_in_memory(
    server: HTTPServer, settings: Settings
) -> None:
    settings.SIFT_FETCH_MAX_BYTES = 2**20
    bomb = gzip_body(b"\0" * (64 * 2**20))
    server.expect_request("/").respond_with_data(bomb, headers={"Content-Encoding": "gzip"})
    server.expect_request("/warm").respond_with_data(gzip_body(b"warm"), headers={"Content-Encoding": "gzip"})
    client.download(server.url_for("/warm"))  # first-use imports and caches are not the bomb's doing
    tracemalloc.start()
    try:
        assert fetch_error(server.url_for("/")).outcome == "too_long"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert peak < 16 * 2**20  # a few times the cap, nowhere near the 64 MiB it expands to


def test_one_byte_a_second_body_times_out_within_the_deadline(
    raw_server: Callable[..., RawServer], settings: Settings
) -> None:
    settings.SIFT_FETCH_TIMEOUT = 2.0
    upstream = raw_server(drip(b"x" * 100, at_once=b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"))
    started = time.monotonic()

    error = fetch_error(f"http://127.0.0.1:{upstream.port}/")

    assert error.outcome == "timeout"
    assert time.monotonic() - started < 2.0 + 1.0


def test_one_byte_a_second_status_line_times_out_within_the_deadline(
    raw_server: Callable[..., RawServer], settings: Settings
) -> None:
    settings.SIFT_FETCH_TIMEOUT = 2.0
    upstream = raw_server(drip(b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 60))
    started = time.monotonic()

    error = fetch_error(f"http://127.0.0.1:{upstream.port}/")

    assert error.outcome == "timeout"
    assert time.monotonic() - started < 2.0 + 1.0


def test_body_ending_early_because_of_the_deadline_is_not_mistaken_for_a_whole_body(
    raw_server: Callable[..., RawServer], settings: Settings
) -> None:
    settings.SIFT_FETCH_TIMEOUT = 2.0
    upstream = raw_server(drip(b"x" * 100, at_once=b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"))

    assert fetch_error(f"http://127.0.0.1:{upstream.port}/").outcome == "timeout"


@pytest.fixture
def stalled_port() -> Iterator[int]:
    """A listener whose accept queue is full: the kernel drops further SYNs, so connect hangs."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.1)
    yield port
    for filler in fillers:
        filler.close()
    listener.close()


def test_connect_that_stalls_times_out_on_the_connect_timeout(settings: Settings, stalled_port: int) -> None:
    settings.SIFT_FETCH_CONNECT_TIMEOUT = 1.0
    settings.SIFT_FETCH_TIMEOUT = 30.0

    error = fetch_error(f"http://127.0.0.1:{stalled_port}/")

    assert error.outcome == "timeout"
    assert "accept a connection within 1 s" in error.message


# Unreachable and broken upstreams --------------------------------------------------------------


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return probe.getsockname()[1]


def test_connection_refused_is_upstream_5xx_without_status(names: dict[str, list[str]]) -> None:
    error = fetch_error(f"http://127.0.0.1:{closed_port()}/")

    assert error.outcome == "upstream_5xx"
    assert error.upstream_status is None
    assert error.hint == "The site could not be reached; check the host name or retry later."


def reset(conn: socket.socket, _: RawServer) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST


@pytest.mark.parametrize(
    "handler",
    [
        reset,
        answer("garbage", {}),
        lambda conn, _: conn.sendall(b"NOT HTTP AT ALL\r\n\r\n"),
        answer("200 OK", {"Content-Length": "100"}, b"short"),
    ],
    ids=["reset", "bad-status", "not-http", "truncated"],
)
def test_broken_upstream_is_upstream_5xx(
    raw_server: Callable[..., RawServer], handler: Callable[[socket.socket, RawServer], None]
) -> None:
    upstream = raw_server(handler)

    error = fetch_error(f"http://127.0.0.1:{upstream.port}/")

    assert error.outcome == "upstream_5xx"
    assert error.upstream_status is None
    assert len(upstream.requests) == 1


def test_host_name_that_does_not_resolve_is_upstream_5xx(monkeypatch: pytest.MonkeyPatch) -> None:
    def resolve(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(guard, "resolve", resolve)

    error = fetch_error("https://no-such-host.test/")

    assert error.outcome == "upstream_5xx"
    assert "check the host name" in error.hint


# TLS ----------------------------------------------------------------------------------------

TLS_NAME = "sift-test.example"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A throw-away CA and a certificate it signed for ``sift-test.example`` (openssl CLI)."""
    folder = tmp_path_factory.mktemp("tls")
    files = {
        name: folder / name for name in ("ca.key", "ca.pem", "leaf.key", "leaf.csr", "leaf.pem", "ext.cnf")
    }
    files["ext.cnf"].write_text(
        f"subjectAltName=DNS:{TLS_NAME}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2"
    commands = [
        f"req -x509 {ec} -keyout {files['ca.key']} -out {files['ca.pem']} -subj /CN=sift-test-CA",
        f"req {ec} -keyout {files['leaf.key']} -out {files['leaf.csr']} -subj /CN={TLS_NAME}",
        f"x509 -req -in {files['leaf.csr']} -CA {files['ca.pem']} -CAkey {files['ca.key']} -CAcreateserial"
        f" -out {files['leaf.pem']} -days 2 -extfile {files['ext.cnf']}",
    ]
    for command in commands:
        subprocess.run(["openssl", *command.split()], check=True, capture_output=True)
    return files


@pytest.fixture(scope="module")
def tls_server(tls_files: dict[str, Path]) -> Iterator[tuple[HTTPServer, list[str]]]:
    server_names: list[str] = []
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls_files["leaf.pem"], tls_files["leaf.key"])
    context.sni_callback = lambda _sock, name, _ctx: server_names.append(name or "")
    server = HTTPServer(host="127.0.0.1", port=0, ssl_context=context)
    server.start()
    yield server, server_names
    server.clear()
    server.stop()


@pytest.fixture
def https(
    tls_server: tuple[HTTPServer, list[str]], tls_files: dict[str, Path], names: dict[str, list[str]]
) -> Iterator[tuple[HTTPServer, list[str], pytest.MonkeyPatch]]:
    server, server_names = tls_server
    server.clear()
    server_names.clear()
    server.expect_request("/").respond_with_handler(lambda request: Response(f"over tls to {request.host}"))
    names[TLS_NAME] = ["127.0.0.1"]
    names["other-name.example"] = ["127.0.0.1"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(client, "CA_BUNDLE", str(tls_files["ca.pem"]))
        yield server, server_names, patch


def test_https_connects_to_the_vetted_address_and_verifies_the_host_name(
    https: tuple[HTTPServer, list[str], pytest.MonkeyPatch],
) -> None:
    server, server_names, _ = https

    result = client.download(f"https://{TLS_NAME}:{server.port}/")

    assert result.body == f"over tls to {TLS_NAME}:{server.port}".encode()
    assert server_names == [TLS_NAME]


def test_https_certificate_for_another_name_is_refused(
    https: tuple[HTTPServer, list[str], pytest.MonkeyPatch],
) -> None:
    server, server_names, _ = https

    error = fetch_error(f"https://other-name.example:{server.port}/")

    assert error.outcome == "upstream_5xx"
    assert "certificate" in error.hint
    assert server_names == ["other-name.example"]
    assert server.log == []


def test_https_certificate_from_an_untrusted_authority_is_refused(
    https: tuple[HTTPServer, list[str], pytest.MonkeyPatch],
) -> None:
    server, _, patch = https
    patch.setattr(client, "CA_BUNDLE", certifi.where())

    error = fetch_error(f"https://{TLS_NAME}:{server.port}/")

    assert error.outcome == "upstream_5xx"
    assert server.log == []


def test_https_handshake_that_drips_times_out_within_the_deadline(
    raw_server: Callable[..., RawServer], names: dict[str, list[str]], settings: Settings
) -> None:
    settings.SIFT_FETCH_TIMEOUT = 2.0
    names[TLS_NAME] = ["127.0.0.1"]
    upstream = raw_server(drip(b"\x16\x03\x03\x40\x00" + b"\x02" * 60), head=False)
    started = time.monotonic()

    error = fetch_error(f"https://{TLS_NAME}:{upstream.port}/")

    assert error.outcome == "timeout"
    assert time.monotonic() - started < 2.0 + 1.0


# Many-member bodies and the deadline on CPU-bound work -----------------------------------------


def many_gzip_members(size: int, payload: bytes = b"a") -> bytes:
    member = gzip.compress(payload, mtime=0)
    return member * (size // len(member))


def test_a_16_mib_body_of_tiny_gzip_members_downloads_well_within_the_deadline(
    server: HTTPServer, settings: Settings
) -> None:
    settings.SIFT_FETCH_TIMEOUT = 30.0  # the default; member by member copying took minutes here
    body = many_gzip_members(16 * 2**20)
    server.expect_request("/").respond_with_data(body, headers={"Content-Encoding": "gzip"})

    result = client.download(server.url_for("/"))

    assert result.body == b"a" * (len(body) // 21)


def test_a_decompression_that_outlasts_the_deadline_ends_with_timeout_within_a_second_of_it(
    server: HTTPServer, settings: Settings
) -> None:
    settings.SIFT_FETCH_TIMEOUT = 1.0
    settings.SIFT_FETCH_MAX_BYTES = 48 * 2**20
    inner = many_gzip_members(40 * 2**20, b"")  # two million empty members: seconds of work
    body = gzip.compress(inner, compresslevel=1, mtime=0)  # and about 300 KB on the wire
    server.expect_request("/").respond_with_data(body, headers={"Content-Encoding": "gzip, gzip"})
    started = time.monotonic()

    error = fetch_error(server.url_for("/"))

    assert error.outcome == "timeout"
    assert time.monotonic() - started < 1.0 + 1.0


# Hostile response headers ---------------------------------------------------------------------


def length_answer(length: str) -> Callable[[socket.socket, RawServer], None]:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: " + length.encode() + b"\r\nConnection: close\r\n\r\n"
    return lambda conn, _: conn.sendall(head + b"hello")


@pytest.mark.parametrize("length", ["\u00b2", "1\u00b2", "-1", "0x10", "5, 5"])
def test_a_content_length_that_is_not_ascii_digits_is_ignored(
    raw_server: Callable[..., RawServer], length: str
) -> None:
    upstream = raw_server(length_answer(length))

    assert client.download(f"http://127.0.0.1:{upstream.port}/").body == b"hello"


@pytest.mark.parametrize("length", ["10, 11", "9" * 40])
def test_a_content_length_that_cannot_frame_the_body_is_upstream_5xx(
    raw_server: Callable[..., RawServer], length: str
) -> None:
    upstream = raw_server(length_answer(length))

    assert fetch_error(f"http://127.0.0.1:{upstream.port}/").outcome == "upstream_5xx"


def test_a_declared_length_over_the_cap_is_refused_before_reading(
    raw_server: Callable[..., RawServer], small_cap: int
) -> None:
    upstream = raw_server(answer("200 OK", {"Content-Length": f"{small_cap + 1}, {small_cap + 1}"}, b"x"))

    assert fetch_error(f"http://127.0.0.1:{upstream.port}/").outcome == "too_long"


@pytest.mark.parametrize("location", ["http://[::1", "http://[oops]/x", "/a\x7fb", "/" + "x" * 5000])
def test_a_location_that_does_not_parse_leaves_the_redirect_as_the_answer(
    raw_server: Callable[..., RawServer], location: str
) -> None:
    upstream = raw_server(answer("302 Found", {"Location": location, "Content-Length": "4"}, b"gone"))

    result = client.download(f"http://127.0.0.1:{upstream.port}/")

    assert (result.status, result.body) == (302, b"gone")
    assert len(upstream.requests) == 1


def test_a_location_with_utf8_bytes_is_followed_percent_encoded(
    raw_server: Callable[..., RawServer],
) -> None:
    def handler(conn: socket.socket, server: RawServer) -> None:
        if server.requests[-1].startswith(b"GET /start "):
            conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /caf\xc3\xa9\r\nContent-Length: 0\r\n\r\n")
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\narrived")

    upstream = raw_server(handler)

    result = client.download(f"http://127.0.0.1:{upstream.port}/start")

    assert result.final_url == f"http://127.0.0.1:{upstream.port}/caf%C3%A9"
    assert result.body == b"arrived"


@pytest.mark.parametrize(
    ("content_type", "media", "charset"),
    [
        ("text/html; charset=rot13", "text/html", None),
        ("text/html; charset=base64", "text/html", None),
        ("text/html; charset=latin1", "text/html", "latin1"),
        ("text/ht ml; charset=utf-8", "", None),
        ("\u00e9/\u00e9", "", None),
    ],
)
def test_the_declared_type_is_a_token_pair_and_the_charset_a_whatwg_label(
    raw_server: Callable[..., RawServer], content_type: str, media: str, charset: str | None
) -> None:
    upstream = raw_server(
        lambda conn, _: conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: "
            + content_type.encode("latin-1")
            + b"\r\nContent-Length: 2\r\n\r\nok"
        )
    )

    result = client.download(f"http://127.0.0.1:{upstream.port}/")

    assert (result.content_type, result.charset) == (media, charset)
