"""The SSRF guard: may this URL be fetched, and at which addresses? (docs/fetch-client.md)

``check_url`` resolves the host once and classifies every address it resolves to. The client then
connects to those vetted addresses and never looks the name up again, so a DNS answer that
changes between the check and the connection (rebinding) cannot steer it anywhere else.

Addresses are classified with explicit tables rather than ``ipaddress.is_global`` alone: Python
3.11 calls NAT64, 6to4, IPv4-mapped and site-local addresses global. IPv6 forms that carry an
IPv4 address are unwrapped first, so ``::ffff:127.0.0.1`` or ``64:ff9b::a00:1`` is refused for what
it really points at. Refusals name the reason, never the address or host: an agent could
otherwise map a private network through error messages.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, quote, urlsplit

import idna
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from fetch.errors import FetchError
from fetch.limits import MAX_URL_CHARS
from fetch.outcomes import Outcome

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_PORTS = {"http": 80, "https": 443}
_CONTROL = re.compile(r"[\x00-\x20\x7f]")
# Characters left as they are in the request target: RFC 3986 reserved and unreserved, and ``%``
# so that existing escapes survive. Everything else (non-ASCII, quotes, braces) is escaped.
_TARGET_SAFE = "/?:@!$&'()*+,;=-._~%[]"


def _networks(*cidrs: str) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(cidr) for cidr in cidrs)


# Checked in order; the first match names the reason. Sources: the IANA IPv4 and IPv6
# special-purpose address registries.
_CATEGORIES: tuple[tuple[str, tuple[IPNetwork, ...]], ...] = (
    ("unspecified", _networks("0.0.0.0/8", "::/128")),
    ("loopback", _networks("127.0.0.0/8", "::1/128")),
    ("private", _networks("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "fec0::/10")),
    ("link-local", _networks("169.254.0.0/16", "fe80::/10")),
    ("shared carrier-grade NAT space", _networks("100.64.0.0/10")),
    ("multicast", _networks("224.0.0.0/4", "ff00::/8")),
    ("reserved for benchmarking", _networks("198.18.0.0/15", "2001:2::/48")),
    (
        "reserved for documentation",
        _networks("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32", "3fff::/20"),
    ),
    (
        "reserved",
        _networks(
            "240.0.0.0/4", "192.0.0.0/24", "192.88.99.0/24", "::/8", "100::/64", "2001::/23", "5f00::/16"
        ),
    ),
)
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_COMPATIBLE = ipaddress.ip_network("::/96")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_NAT64 = _networks("64:ff9b::/96", "64:ff9b:1::/48")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_TEREDO = ipaddress.ip_network("2001::/32")


@dataclass(frozen=True)
class Destination:
    """A URL that passed the guard, with the addresses the client may connect to."""

    url: str
    scheme: str
    host: str  # ASCII (IDNA), lower-case, without brackets: what TLS verifies and Host names
    port: int
    path: str  # the request target: path and query, escaped
    addresses: tuple[str, ...]

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, in the resolver's order. Tests replace this function."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


# Looked up by name at each check, so a test's stand-in counts wherever it is set: replacing
# ``resolve`` in this process, or SIFT_TEST_RESOLVE_FUNC in a process started beside a test.
SYSTEM_RESOLVE = "fetch.guard.resolve"
TEST_RESOLVE_MODULES = ("tests.", "bench.")
TEST_RESOLVE_FUNC_RULE = "only a function of a module under tests/ or bench/ may replace the resolver"


def resolver() -> Callable[[str, int], list[str]]:
    """``resolve``, or the tests' and benchmarks' stand-in (``SIFT_TEST_RESOLVE_FUNC``)."""
    override = settings.SIFT_TEST_RESOLVE_FUNC
    if override and not allowed_test_resolver(override):
        raise ImproperlyConfigured(f"SIFT_TEST_RESOLVE_FUNC={override!r}: {TEST_RESOLVE_FUNC_RULE}")
    found: Callable[[str, int], list[str]] = import_string(override or SYSTEM_RESOLVE)
    return found


def allowed_test_resolver(path: str) -> bool:
    return path.startswith(TEST_RESOLVE_MODULES)


def _refuse(reason: str, hint: str) -> FetchError:
    return FetchError(
        Outcome.BLOCKED, f"refused to fetch: {reason}", f"{reason[:1].upper()}{reason[1:]}. {hint}"
    )


_PUBLIC_HINT = "sift only fetches publicly routable addresses; use a public URL."


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 translation or tunnelling form carries, and the form's name."""
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _COMPATIBLE and int(address) > 1:
        return "an IPv4-compatible address", low32
    if address in _TRANSLATED:
        return "an IPv4-translated address", low32
    if any(address in network for network in _NAT64):
        return "a NAT64 address", low32
    if address.sixtofour is not None:
        return "a 6to4 address", address.sixtofour
    if address.teredo is not None:
        return "a Teredo address", address.teredo[1]
    return None


def _category(address: IPAddress) -> str | None:
    for name, networks in _CATEGORIES:
        if any(address in network for network in networks):
            return name
    if address.version == 6 and address not in _GLOBAL_UNICAST_V6:
        return "not publicly routable"
    return None if address.is_global else "not publicly routable"


def _is_allowed(address: IPAddress, allowed: Iterable[IPNetwork]) -> bool:
    return any(address in network for network in allowed)


def unwrap(address: IPAddress) -> IPAddress:
    """The IPv4 address behind an IPv4-mapped IPv6 address (the same host), else the address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def address_refusal(address: IPAddress, allowed: Iterable[IPNetwork] = ()) -> str | None:
    """Why ``address`` may not be fetched (``"the address is loopback"``), or None if it may.

    ``allowed`` networks are let through (``SIFT_FETCH_ALLOW_CIDRS``). A translation form
    (NAT64, 6to4, Teredo, IPv4-compatible) is refused for the IPv4 address it carries, and
    refused anyway unless the form itself is inside an allowed network.
    """
    allowed = tuple(allowed)
    address = unwrap(address)
    embedded = _embedded_ipv4(address) if isinstance(address, ipaddress.IPv6Address) else None
    if embedded is not None:
        form, inner = embedded
        inner_refusal = address_refusal(inner, allowed)
        if inner_refusal is not None:
            return f"{inner_refusal}, inside {form}"
        return None if _is_allowed(address, allowed) else f"the address is {form}"
    if _is_allowed(address, allowed):
        return None
    category = _category(address)
    return None if category is None else f"the address is {category}"


def _parse(url: str) -> tuple[SplitResult, int]:
    if len(url) > MAX_URL_CHARS or _CONTROL.search(url):
        raise _refuse("the URL is too long or holds spaces or control characters", "Check the URL.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise _refuse("the URL cannot be parsed", "Check the URL.") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise _refuse(
            f"the scheme {scheme or '(none)'!r} is not allowed", "Only http and https URLs can be fetched."
        )
    if parts.username is not None or parts.password is not None:
        raise _refuse("the URL carries credentials", "Send the URL without a user name or password.")
    if not parts.hostname:
        raise _refuse("the URL has no host", "Send an absolute http:// or https:// URL.")
    return parts, port if port is not None else DEFAULT_PORTS[scheme]


_LOOPBACK_PROBES = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))


def _host_name(hostname: str) -> str:
    """The host as compared and connected to: ASCII, without the root's trailing dot."""
    if "%" in hostname and ":" in hostname:
        raise _refuse("the URL carries an IPv6 zone id", "Send the address without a zone id.")
    host = hostname[:-1] if hostname.endswith(".") else hostname
    if not host or host.endswith(".") or ".." in host:
        raise _refuse("the host name is not a valid domain name", "Check the URL's host name.")
    return _ascii_host(host)


def _loopback_name_refusal(host: str) -> FetchError | None:
    # ``localhost`` and its subdomains mean this machine whatever DNS says (RFC 6761), so they are
    # refused by name, before any lookup, unless the deployment opened the loopback network.
    if host != "localhost" and not host.endswith(".localhost"):
        return None
    allowed = tuple(settings.SIFT_FETCH_ALLOW_CIDRS)
    if any(_is_allowed(probe, allowed) for probe in _LOOPBACK_PROBES):
        return None
    return _refuse("the host name is loopback (localhost or one of its subdomains)", _PUBLIC_HINT)


def _ascii_host(hostname: str) -> str:
    if hostname.isascii():
        return hostname
    try:
        return idna.encode(hostname, uts46=True).decode("ascii")
    except idna.IDNAError:
        raise _refuse("the host name is not a valid domain name", "Check the URL's host name.") from None


def _port_refusal(port: int) -> FetchError:
    ports = ", ".join(str(p) for p in sorted(settings.SIFT_FETCH_ALLOW_PORTS))
    return _refuse(
        f"port {port} is not allowed", f"sift fetches only ports {ports}; use a URL on one of them."
    )


def _resolve_checked(host: str, port: int) -> list[IPAddress]:
    try:
        found = resolver()(host, port)
    except ValueError:  # UnicodeError from the IDNA codec, or a NUL byte
        raise _refuse("the host name is not valid", "Check the URL's host name.") from None
    except OSError:  # socket.gaierror: no such name, or the resolver failed
        found = []
    if not found:
        raise FetchError(
            Outcome.UPSTREAM_5XX,
            "the host name could not be resolved",
            "The site could not be reached; check the host name or retry later.",
        )
    try:
        return [ipaddress.ip_address(item) for item in dict.fromkeys(found)]
    except ValueError:
        raise _refuse(
            "the host name did not resolve to an IP address", "Check the URL's host name."
        ) from None


def _vet(addresses: list[IPAddress], port: int) -> tuple[str, ...]:
    allowed = tuple(settings.SIFT_FETCH_ALLOW_CIDRS)
    for address in addresses:
        refusal = address_refusal(address, allowed)
        if refusal is not None:
            raise _refuse(refusal, _PUBLIC_HINT)
        if settings.SIFT_FETCH_ONLY_ALLOWED and not _is_allowed(unwrap(address), allowed):
            raise _refuse(
                "the address is outside the networks this deployment may fetch",
                "This deployment fetches only from its allowed networks (SIFT_FETCH_ONLY_ALLOWED).",
            )
    every_allowed = all(_is_allowed(unwrap(address), allowed) for address in addresses)
    if port not in settings.SIFT_FETCH_ALLOW_PORTS and not every_allowed:
        raise _port_refusal(port)
    return tuple(str(unwrap(address)) for address in addresses)


def check_url(url: str) -> Destination:
    """Vet ``url`` (scheme, credentials, port, every resolved address) or raise ``FetchError``.

    ``blocked`` when the guard refuses; ``upstream_5xx`` (no upstream status) when the host
    name does not resolve.
    """
    parts, port = _parse(url)
    host = _host_name(parts.hostname or "")
    name_refusal = _loopback_name_refusal(host)
    if name_refusal is not None:
        raise name_refusal
    if port not in settings.SIFT_FETCH_ALLOW_PORTS and not settings.SIFT_FETCH_ALLOW_CIDRS:
        raise _port_refusal(port)  # no network could exempt it, so spare the DNS lookup
    addresses = _vet(_resolve_checked(host, port), port)
    target = quote(parts.path or "/", safe=_TARGET_SAFE)
    if parts.query:
        target += "?" + quote(parts.query, safe=_TARGET_SAFE)
    return Destination(url, parts.scheme.lower(), host, port, target, addresses)
