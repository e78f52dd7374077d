"""One name per host, whatever the spelling: what per-host state is keyed on (host turns,
robots.txt copies, webhook shares; docs/politeness.md).

Imports nothing of the project, so the job side may key on it too without reaching the fetch
pipeline.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket

import idna


def canonical_host(hostname: str) -> str:
    """``hostname`` as one name per host: mapped by IDNA (UTS #46) and lower-cased, without the
    root's trailing dot; an IP address in its canonical form.

    ``127.1``, ``0x7f.0.0.1`` and ``2130706433`` are all ``127.0.0.1``, as the resolver reads
    them. An IPv4-mapped IPv6 address (``[::ffff:127.0.0.1]``, ``[::FFFF:7f00:1]``) is the IPv4
    address it maps, the host a connection to it reaches. A name IDNA refuses is only lower-cased
    (the guard refuses it anyway).
    """
    host = hostname.strip("[]").lower()
    if not host.isascii():
        with contextlib.suppress(idna.IDNAError):
            host = idna.encode(host, uts46=True).decode("ascii")
    host = host.removesuffix(".")
    if ":" in host:
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            return host
        return str(address.ipv4_mapped or address)
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except OSError:  # not an IPv4 address in any of the forms the resolver accepts
        return host
