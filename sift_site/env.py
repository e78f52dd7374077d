"""Typed readers for environment variables, used only by ``sift_site.settings``.

Each reader returns the default when the variable is unset or empty, and raises
``ImproperlyConfigured`` naming the variable when the value is malformed, so a
typo stops start-up instead of silently changing behaviour.
"""

from __future__ import annotations

import ipaddress
import os
import re

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_SIZE = re.compile(r"^(\d+)\s*(b|kb|kib|mb|mib|gb|gib)?$")
_SIZE_UNITS = {
    "b": 1,
    "kb": 1000,
    "kib": 1024,
    "mb": 1000**2,
    "mib": 1024**2,
    "gb": 1000**3,
    "gib": 1024**3,
}


def _raw(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def _refuse(name: str, value: str, expected: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"{name}={value!r} is not valid: expected {expected}")


def env_str(name: str, default: str) -> str:
    return _raw(name) or default


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise _refuse(name, value, "true or false")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    value = _raw(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise _refuse(name, value, "a whole number") from None
    if number < minimum:
        raise _refuse(name, value, f"a whole number of at least {minimum}")
    return number


def env_duration(name: str, default: str) -> float:
    """Seconds from a duration like ``90s``, ``10m``, ``24h`` (a bare number is seconds)."""
    value = _raw(name) or default
    match = _DURATION.match(value.lower())
    if not match:
        raise _refuse(name, value, "a duration such as 90s, 10m or 24h")
    return float(match[1]) * _DURATION_UNITS[match[2] or "s"]


def env_bytes(name: str, default: str) -> int:
    """Bytes from a size like ``20MiB``, ``64 MB`` or a bare number of bytes."""
    value = _raw(name) or default
    match = _SIZE.match(value.lower())
    if not match:
        raise _refuse(name, value, "a size such as 20MiB, 500KB or 1048576")
    return int(match[1]) * _SIZE_UNITS[match[2] or "b"]


def env_list(name: str, default: str = "") -> list[str]:
    value = _raw(name) or default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_ports(name: str, default: str) -> frozenset[int]:
    ports = set()
    for item in env_list(name, default):
        if not item.isdigit() or not 0 < int(item) < 65536:
            raise _refuse(name, item, "a comma-separated list of ports (1-65535)")
        ports.add(int(item))
    return frozenset(ports)


def env_networks(name: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    networks = []
    for item in env_list(name):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise _refuse(name, item, "a comma-separated list of CIDRs such as 127.0.0.0/8") from None
    return tuple(networks)
