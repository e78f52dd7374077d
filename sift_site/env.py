"""Typed readers for environment variables, used only by ``sift_site.settings``.

Each reader returns the default when the variable is unset or empty, and raises
``ImproperlyConfigured`` naming the variable when the value is malformed, so a
typo stops start-up instead of silently changing behaviour.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

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


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = _raw(name)
    if value is None:
        return default
    if value.lower() not in choices:
        raise _refuse(name, value, "one of " + ", ".join(choices))
    return value.lower()


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


def env_duration(name: str, default: str, *, positive: bool = False) -> float:
    """Seconds from a duration like ``90s``, ``10m``, ``24h`` (a bare number is seconds).

    ``positive``: zero is refused too (a timeout or a lifetime of nothing would refuse everything)."""
    value = _raw(name) or default
    match = _DURATION.match(value.lower())
    if not match:
        raise _refuse(name, value, "a duration such as 90s, 10m or 24h")
    seconds = float(match[1]) * _DURATION_UNITS[match[2] or "s"]
    if positive and seconds <= 0:
        raise _refuse(name, value, "a duration longer than zero, such as 90s, 10m or 24h")
    return seconds


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


# Django's own check (security.W009) calls a key weak below this length.
SECRET_KEY_MIN_LENGTH = 50
_NEW_KEY = "run `make secret-key` in the checkout to write a random one (see docs/operations.md)"


def env_secret_key(name: str, file_variable: str, base_dir: Path, default_file: str) -> str:
    """Django's signing key: the variable ``name``, else the file that ``file_variable`` names.

    There is no fallback constant: a key anyone can read in the source lets anyone forge
    sessions and the cluster's signed task payloads. A relative file name is taken from
    ``base_dir``, so web, cluster and commands started anywhere read the same file.
    """
    value = _raw(name)
    if value is not None:
        return _strong_key(value, name, f"set {name} to {SECRET_KEY_MIN_LENGTH} or more random characters")
    path = Path(_raw(file_variable) or default_file)
    if not path.is_absolute():
        path = base_dir / path
    try:
        key = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ImproperlyConfigured(
            f"no secret key: {name} is not set and the key file {path} does not exist; "
            f"set {name} to {SECRET_KEY_MIN_LENGTH} or more random characters, or {_NEW_KEY}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ImproperlyConfigured(
            f"the secret key file {path} cannot be read ({type(exc).__name__}); "
            f"make it a text file readable by the service, or set {name}"
        ) from None
    return _strong_key(key, f"the key file {path} ({file_variable})", f"delete it and {_NEW_KEY}")


def _strong_key(key: str, source: str, hint: str) -> str:
    # The same rule as Django's own deploy check, enforced at start-up: not only under --deploy.
    if len(key) < SECRET_KEY_MIN_LENGTH or len(set(key)) < 5 or key.startswith("django-insecure-"):
        raise ImproperlyConfigured(
            f"{source} holds a weak secret key ({len(key)} characters, at least "
            f"{SECRET_KEY_MIN_LENGTH} varied ones needed); {hint}"
        )
    return key


# RFC 6750's b64token: the characters a bearer token can carry in an Authorization header.
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")


def env_bearer_token(name: str, *, min_length: int) -> str:
    """A bearer token an operator chose, or ``""`` when unset; a short one is refused."""
    value = _raw(name)
    if value is None:
        return ""
    if len(value) < min_length or not _BEARER_TOKEN.fullmatch(value):
        # The value is a secret: name the variable, never echo it.
        raise ImproperlyConfigured(
            f"{name} is not valid: expected {min_length} or more of the characters "
            "A-Z a-z 0-9 - . _ ~ + / (make one with: "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return value
