"""The SSRF guard (docs/fetch-client.md): which URLs and addresses may be fetched, and why not.

Host names are resolved by a stand-in resolver; numeric spellings go through the real
``getaddrinfo`` with ``AI_NUMERICHOST``, which parses and never asks DNS.
"""

from __future__ import annotations

import ipaddress
import socket
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pytest_django.fixtures import Settings

from fetch import guard
from fetch.errors import FetchError

from .factories import LOOPBACK
from .upstream import REAL_RESOLVE, hanging_resolve, numeric_resolve, resolver_for

PUBLIC = "93.184.215.14"


@pytest.fixture(autouse=True)
def no_allowlist(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = ()
    settings.SIFT_FETCH_ALLOW_PORTS = frozenset({80, 443, 8080, 8443})
    monkeypatch.setattr(guard, "resolve", numeric_resolve)


@pytest.fixture
def public_fetchable(settings: Settings) -> None:
    """Let public addresses pass, as a deployment does; ``check_url`` never connects anywhere."""
    settings.SIFT_FETCH_ONLY_ALLOWED = False


def refusal(url: str) -> FetchError:
    with pytest.raises(FetchError) as caught:
        guard.check_url(url)
    return caught.value


def teredo(client: str, server: str = "65.54.227.120") -> str:
    """The Teredo address of ``client``: the client's IPv4 address is stored inverted."""
    value = (0x20010000 << 96) | (int(ipaddress.IPv4Address(server)) << 64) | 0xFFFFFFFF
    value ^= 0xFFFFFFFF ^ (~int(ipaddress.IPv4Address(client)) & 0xFFFFFFFF)
    return str(ipaddress.IPv6Address(value))


REFUSED_ADDRESSES = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("10.0.0.7", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.254", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("100.127.255.254", "carrier-grade NAT"),
    ("169.254.169.254", "link-local"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.254", "benchmarking"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("192.0.0.8", "reserved"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.1", "documentation"),
    ("203.0.113.1", "documentation"),
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("fe80::1", "link-local"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("fec0::1", "private"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("100::1", "reserved"),
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:10.0.0.1", "private"),
    ("::127.0.0.1", "loopback, inside an IPv4-compatible address"),
    ("::ffff:0:127.0.0.1", "loopback, inside an IPv4-translated address"),
    ("64:ff9b::7f00:1", "loopback, inside a NAT64 address"),
    ("64:ff9b::a9fe:a9fe", "link-local, inside a NAT64 address"),
    ("64:ff9b:1::7f00:1", "loopback, inside a NAT64 address"),
    ("2002:7f00:1::1", "loopback, inside a 6to4 address"),
    ("2002:a00:1::1", "private, inside a 6to4 address"),
    (teredo("127.0.0.1"), "loopback, inside a Teredo address"),
    ("64:ff9b::808:808", "the address is a NAT64 address"),
    ("2002:808:808::1", "the address is a 6to4 address"),
    (teredo("8.8.8.8"), "the address is a Teredo address"),
]


@pytest.mark.parametrize(("address", "reason"), REFUSED_ADDRESSES)
def test_non_public_address_is_refused_with_its_reason(address: str, reason: str) -> None:
    found = guard.address_refusal(ipaddress.ip_address(address))

    assert found is not None
    assert reason in found


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", PUBLIC, "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_address_passes(address: str) -> None:
    assert guard.address_refusal(ipaddress.ip_address(address)) is None


def test_allowed_network_lets_its_addresses_through() -> None:
    assert guard.address_refusal(ipaddress.ip_address("127.0.0.1"), LOOPBACK) is None
    assert guard.address_refusal(ipaddress.ip_address("::ffff:127.0.0.1"), LOOPBACK) is None
    assert guard.address_refusal(ipaddress.ip_address("10.0.0.1"), LOOPBACK) is not None


def test_allowed_ipv4_network_does_not_open_its_nat64_form() -> None:
    assert (
        guard.address_refusal(ipaddress.ip_address("64:ff9b::7f00:1"), LOOPBACK)
        == "the address is a NAT64 address"
    )


LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.1",
    "0x7f.1",
    "2130706433",
    "0177.0.0.1",
    "0x7f000001",
    "127.0.0x1",
    "localhost",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[::127.0.0.1]",
    "[64:ff9b::7f00:1]",
    "[2002:7f00:1::]",
]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_every_spelling_of_loopback_is_blocked(host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "resolve", resolver_for({}))

    error = refusal(f"http://{host}/")

    assert error.outcome == "blocked"
    assert "loopback" in error.message
    assert "loopback" in error.hint


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "'file'"),
        ("gopher://example.test/", "'gopher'"),
        ("ftp://example.test/", "'ftp'"),
        ("//example.test/", "'(none)'"),
        ("http://user:secret@example.test/", "credentials"),
        ("http:///path", "no host"),
        ("http://example.test:99999/", "cannot be parsed"),
        ("http://exa mple.test/", "control characters"),
    ],
)
def test_url_that_is_not_plain_http_is_blocked(url: str, reason: str) -> None:
    error = refusal(url)

    assert error.outcome == "blocked"
    assert reason in error.message


def test_host_name_resolving_to_private_address_is_blocked_without_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(guard, "resolve", resolver_for({"internal.test": ["10.0.0.7"]}))

    error = refusal("http://internal.test/admin")

    assert error.outcome == "blocked"
    assert "private" in error.message
    for secret in ("10.0.0.7", "internal.test"):
        assert secret not in error.message
        assert secret not in error.hint


@pytest.mark.parametrize("answers", [[PUBLIC, "10.0.0.7"], ["10.0.0.7", PUBLIC], [PUBLIC, "::1"]])
def test_name_with_one_public_and_one_private_address_is_blocked(
    answers: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard, "resolve", resolver_for({"mixed.test": answers}))

    assert refusal("https://mixed.test/").outcome == "blocked"


@pytest.mark.usefixtures("public_fetchable")
def test_name_with_public_addresses_passes_with_every_address_for_the_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(guard, "resolve", resolver_for({"public.test": [PUBLIC, "8.8.8.8"]}))

    destination = guard.check_url("https://public.test/a%20b/ü?q=1#frag")

    assert destination.addresses == (PUBLIC, "8.8.8.8")
    assert (destination.scheme, destination.host, destination.port) == ("https", "public.test", 443)
    assert destination.path == "/a%20b/%C3%BC?q=1"
    assert destination.host_header == "public.test"


@pytest.mark.usefixtures("public_fetchable")
def test_name_is_resolved_once_per_check(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        return [PUBLIC]

    monkeypatch.setattr(guard, "resolve", resolve)

    guard.check_url("http://public.test:8080/")

    assert calls == ["public.test"]


@pytest.mark.usefixtures("public_fetchable")
def test_international_host_name_is_resolved_in_its_ascii_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "resolve", resolver_for({"xn--bcher-kva.test": [PUBLIC]}))

    destination = guard.check_url("http://bücher.test:8080/")

    assert destination.host == "xn--bcher-kva.test"
    assert destination.host_header == "xn--bcher-kva.test:8080"


def test_port_not_allowed_is_blocked_before_any_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(guard, "resolve", lambda host, port: calls.append(host) or [PUBLIC])

    error = refusal("http://public.test:8081/")

    assert error.outcome == "blocked"
    assert "port 8081" in error.message
    assert "80, 443, 8080, 8443" in error.hint
    assert calls == []


@pytest.mark.usefixtures("public_fetchable")
def test_any_port_is_allowed_when_every_address_is_inside_an_allowed_network(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    monkeypatch.setattr(
        guard, "resolve", resolver_for({"dev.test": ["127.0.0.1"], "half.test": ["127.0.0.1", PUBLIC]})
    )

    assert guard.check_url("http://dev.test:9999/").port == 9999
    assert "port 9999" in refusal("http://half.test:9999/").message


def test_host_name_that_does_not_resolve_is_upstream_5xx(monkeypatch: pytest.MonkeyPatch) -> None:
    def resolve(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(guard, "resolve", resolve)

    error = refusal("https://no-such-host.test/")

    assert error.outcome == "upstream_5xx"
    assert error.upstream_status is None
    assert "check the host name" in error.hint


def test_resolver_answer_that_is_not_an_address_is_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "resolve", resolver_for({"odd.test": ["not-an-address"]}))

    assert refusal("http://odd.test/").outcome == "blocked"


def test_a_test_resolver_named_in_settings_answers_the_guards_lookups(settings: Settings) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_TEST_RESOLVE_FUNC = "tests.upstream.hanging_resolve"

    assert guard.resolver() is hanging_resolve
    assert guard.check_url("http://127.0.0.1:9/hook").addresses == ("127.0.0.1",)


def test_a_resolver_outside_the_tests_is_refused(settings: Settings) -> None:
    settings.SIFT_TEST_RESOLVE_FUNC = "socket.gethostbyname_ex"

    with pytest.raises(ImproperlyConfigured, match="only a function of a module under tests/ or bench/"):
        guard.check_url("http://public.test/")


def test_real_resolver_answers_localhost_with_loopback() -> None:
    answers = set(REAL_RESOLVE("localhost", 80))

    assert answers
    assert answers <= {"127.0.0.1", "::1"}


# Property tests -------------------------------------------------------------------------------


def spell(value: int, radix: str) -> str:
    return {"dec": str(value), "hex": hex(value), "HEX": f"0X{value:X}", "oct": f"0{value:o}"}[radix]


@st.composite
def ipv4_spellings(draw: st.DrawFn, network: str) -> tuple[ipaddress.IPv4Address, str]:
    """An address of ``network`` and one of the many ways inet_aton lets you write it."""
    net = ipaddress.IPv4Network(network)
    value = draw(st.integers(int(net.network_address), int(net.broadcast_address)))
    octets = list(value.to_bytes(4, "big"))
    parts = draw(
        st.sampled_from(
            [[value], [octets[0], value & 0xFFFFFF], [octets[0], octets[1], value & 0xFFFF], octets],
        )
    )
    radices = draw(
        st.lists(st.sampled_from(["dec", "hex", "HEX", "oct"]), min_size=len(parts), max_size=len(parts))
    )
    return ipaddress.IPv4Address(value), ".".join(spell(p, r) for p, r in zip(parts, radices, strict=True))


@pytest.mark.parametrize(("network", "reason"), [("127.0.0.0/8", "loopback"), ("10.0.0.0/8", "private")])
@hypothesis_settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_every_numeric_spelling_of_a_refused_address_is_blocked(
    network: str, reason: str, data: st.DataObject
) -> None:
    address, spelling = data.draw(ipv4_spellings(network))
    assert numeric_resolve(spelling, 80) == [str(address)]  # the spelling really means that address

    error = refusal(f"http://{spelling}/")

    assert error.outcome == "blocked"
    assert reason in error.message


# The IANA special-purpose registries, written out independently of the guard's tables, plus
# multicast and the ranges Python does not call global.
IANA_V4 = [
    ipaddress.IPv4Network(cidr)
    for cidr in [
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.31.196.0/24",
        "192.52.193.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "192.175.48.0/24",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    ]
]
IANA_V6 = [ipaddress.IPv6Network(cidr) for cidr in ["2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20"]]
GLOBAL_V6 = ipaddress.IPv6Network("2000::/3")


@given(
    st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address).filter(lambda a: not any(a in n for n in IANA_V4))
)
def test_random_public_ipv4_address_passes(address: ipaddress.IPv4Address) -> None:
    assert guard.address_refusal(address) is None


@given(
    st.integers(int(GLOBAL_V6.network_address), int(GLOBAL_V6.broadcast_address))
    .map(ipaddress.IPv6Address)
    .filter(lambda a: not any(a in n for n in IANA_V6))
)
def test_random_global_unicast_ipv6_address_passes(address: ipaddress.IPv6Address) -> None:
    assert guard.address_refusal(address) is None


@given(st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)))
def test_guard_never_passes_an_address_python_calls_non_global(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    if guard.address_refusal(address) is None:
        assert guard.unwrap(address).is_global


@given(st.sampled_from(IANA_V4[:6] + IANA_V4[-3:]).flatmap(lambda n: st.ip_addresses(network=n)))
def test_random_address_in_a_non_public_ipv4_range_is_refused(address: ipaddress.IPv4Address) -> None:
    assert guard.address_refusal(address) is not None
    assert guard.address_refusal(ipaddress.IPv6Address(f"::ffff:{address}")) is not None


# Names: trailing dots, localhost, zone ids ----------------------------------------------------


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST", "localhost.", "api.localhost", "a.b.localhost."])
def test_localhost_is_refused_by_name_before_any_lookup(host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(guard, "resolve", lambda name, port: calls.append(name) or [PUBLIC])

    error = refusal(f"http://{host}/")

    assert error.outcome == "blocked"
    assert "localhost" in error.hint
    assert "127.0.0.1" not in error.message + error.hint
    assert calls == []


@pytest.mark.parametrize("network", ["127.0.0.0/8", "::1/128"])
def test_localhost_passes_when_the_loopback_network_is_allowed(
    network: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = (ipaddress.ip_network(network),)
    monkeypatch.setattr(guard, "resolve", lambda name, port: ["127.0.0.1"] if "." in network else ["::1"])

    destination = guard.check_url("http://localhost.:8080/")

    assert destination.host == "localhost"
    assert destination.host_header == "localhost:8080"


def test_allowing_another_network_does_not_open_localhost(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = (ipaddress.ip_network("10.0.0.0/8"),)
    monkeypatch.setattr(guard, "resolve", lambda name, port: ["10.0.0.1"])

    assert refusal("http://localhost/").outcome == "blocked"


@pytest.mark.usefixtures("public_fetchable")
def test_host_name_is_compared_and_sent_without_its_trailing_dot(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(guard, "resolve", lambda name, port: calls.append(name) or [PUBLIC])

    destination = guard.check_url("https://Example.org./a")

    assert calls == ["example.org"]
    assert (destination.host, destination.host_header) == ("example.org", "example.org")


@pytest.mark.parametrize("host", ["127.0.0.1.", "10.0.0.7."])
def test_numeric_host_with_a_trailing_dot_is_still_classified(host: str) -> None:
    error = refusal(f"http://{host}/")

    assert error.outcome == "blocked"
    assert "the address is" in error.message


@pytest.mark.parametrize("host", ["example.org..", "a..b.test", "."])
def test_host_with_empty_labels_is_refused(host: str) -> None:
    assert refusal(f"http://{host}/").outcome == "blocked"


@pytest.mark.parametrize("url", ["http://[fe80::1%25eth0]/", "http://[fe80::1%eth0]/", "http://[::1%251]/"])
def test_ipv6_zone_id_is_refused(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "resolve", resolver_for({}))

    error = refusal(url)

    assert error.outcome == "blocked"
    assert "zone id" in error.message or "cannot be parsed" in error.message


# Only the allowed networks (tests, benchmarks, fuzzing) -------------------------------------


@pytest.mark.parametrize(
    "url", [f"http://{PUBLIC}/", "https://[2606:4700:4700::1111]/", "http://public.test/"]
)
def test_only_allowed_refuses_public_addresses_in_the_guard(
    url: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.SIFT_FETCH_ONLY_ALLOWED = True
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    monkeypatch.setattr(guard, "resolve", resolver_for({"public.test": [PUBLIC]}))

    error = refusal(url)

    assert error.outcome == "blocked"
    assert "outside the networks this deployment may fetch" in error.message
    assert "SIFT_FETCH_ONLY_ALLOWED" in error.hint
    assert PUBLIC not in error.message + error.hint


def test_only_allowed_lets_allowed_networks_through(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.SIFT_FETCH_ONLY_ALLOWED = True
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    monkeypatch.setattr(guard, "resolve", resolver_for({"dev.test": ["127.0.0.2"]}))

    assert guard.check_url("http://dev.test:8080/").addresses == ("127.0.0.2",)
    assert guard.check_url("http://[::1]:9/").addresses == ("::1",)


def test_only_allowed_is_on_for_the_whole_test_suite() -> None:
    from django.conf import settings as live_settings

    assert live_settings.SIFT_FETCH_ONLY_ALLOWED is True


def test_public_address_passes_the_guard_when_only_allowed_is_off(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.SIFT_FETCH_ONLY_ALLOWED = False
    monkeypatch.setattr(guard, "resolve", numeric_resolve)

    assert guard.check_url(f"http://{PUBLIC}/").addresses == (PUBLIC,)


# Through the API: refused by the guard, and no connection is ever attempted -------------------

_CONNECTS: list[object] = []
_WATCHING: list[bool] = []


def _watch_connects(event: str, args: tuple[object, ...]) -> None:
    if event == "socket.connect" and _WATCHING:
        _CONNECTS.append(args[1])


sys.addaudithook(_watch_connects)


@pytest.mark.parametrize(
    "url", [f"http://{PUBLIC}/", f"http://{PUBLIC}:8080/a", "http://public.test/", "https://[2606:4700::1]/"]
)
def test_fetch_of_a_public_address_is_403_blocked_with_no_connection_attempted(
    url: str, agent, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    monkeypatch.setattr(guard, "resolve", resolver_for({"public.test": [PUBLIC]}))
    _, client = agent
    _CONNECTS.clear()
    _WATCHING.append(True)
    try:
        response = client.get("/v1/fetch", url=url)
    finally:
        _WATCHING.clear()

    assert response.status_code == 403
    assert response.json()["code"] == "blocked"
    assert "SIFT_FETCH_ONLY_ALLOWED" in response.json()["hint"]
    assert _CONNECTS == []


def test_the_connection_watch_sees_a_real_connection(httpserver) -> None:
    _CONNECTS.clear()
    _WATCHING.append(True)
    try:
        socket.create_connection(("127.0.0.1", httpserver.port)).close()
    finally:
        _WATCHING.clear()

    assert _CONNECTS[-1] == ("127.0.0.1", httpserver.port)
