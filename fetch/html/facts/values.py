"""A declared value made fit to answer: text cleaned and capped, a date in ISO 8601, an absolute
http(s) URL, a BCP 47 language tag, a number. Each reader returns None for a value it cannot read,
so that the next source in order of trust is asked instead.
"""

from __future__ import annotations

import html
import math
import re
from datetime import date, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urljoin, urlsplit

# The longest text kept, by kind of field: a field past its cap is cut there.
TITLE_CHARS = 500
DESCRIPTION_CHARS = 2000
NAME_CHARS = 200
URL_CHARS = 2000
MAX_AUTHORS = 20
# Dates outside these years are a page's mistake (a zero date, a far future), not a fact.
EARLIEST_YEAR = 1900
_SPACES = re.compile(r"\s+")
_TAG = re.compile(r"<[^<>]{0,500}>")
_LANGUAGE = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8}){0,6}$")
_SCHEMA_ORG = re.compile(r"^(?:https?://(?:www\.)?schema\.org/|schema:)", re.IGNORECASE)
_CURRENCY = re.compile(r"^[A-Za-z]{3}$")
_NUMBER = re.compile(r"-?\d[\d.,\s]*")
# Written dates that are not ISO 8601, tried in turn (English month names only).
_DATE_FORMATS = (
    "%Y-%m-%d %H:%M:%S",
    "%Y/%m/%d %H:%M:%S",
    "%Y/%m/%d",
    "%d.%m.%Y",
    "%B %d, %Y",
    "%b %d, %Y",
    "%d %B %Y",
    "%d %b %Y",
    "%B %d %Y",
    "%Y%m%d",
)


def first(value: Any) -> Any:
    """The first of a list of values, or the value itself."""
    if isinstance(value, list):
        return value[0] if value else None
    return value


def text(value: Any, limit: int) -> str | None:
    """A string value with entities decoded, tags and runs of white space removed, cut at
    ``limit`` characters; None for anything else or for a blank."""
    value = first(value)
    if isinstance(value, dict):
        value = value.get("@value")
    if not isinstance(value, str):
        return None
    cleaned = value[: limit * 4]
    if "&" in cleaned:
        cleaned = html.unescape(cleaned)
    if "<" in cleaned:
        cleaned = _TAG.sub(" ", cleaned)
    cleaned = _SPACES.sub(" ", cleaned).strip()
    return cleaned[:limit].rstrip() or None


def name_of(value: Any) -> str | None:
    """A person's, an organisation's or a brand's name: a string, or an object's ``name``."""
    if isinstance(value, dict):
        value = value.get("name")
    return text(value, NAME_CHARS)


def names(value: Any) -> list[str]:
    """Every name of one value or a list of them, in order, without repeats or URLs."""
    found: list[str] = []
    for item in value if isinstance(value, list) else [value]:
        name = name_of(item)
        if name and name not in found and not name.startswith(("http://", "https://")):
            found.append(name)
        if len(found) == MAX_AUTHORS:
            break
    return found


def url(value: Any, base: str) -> str | None:
    """An absolute http(s) URL read against ``base``: a string, or an object's ``url`` or
    ``contentUrl``; None for anything else."""
    value = first(value)
    if isinstance(value, dict):
        value = first(value.get("url") or value.get("contentUrl"))
    if not isinstance(value, str):
        return None
    candidate = value.strip()
    if not candidate or len(candidate) > URL_CHARS or _SPACES.search(candidate):
        return None
    try:
        absolute = urljoin(base, candidate)
        parts = urlsplit(absolute)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return absolute


def page_url(value: Any, base: str) -> str | None:
    """A URL that names a page: ``url`` without its fragment, and an object's ``@id`` too (a
    JSON-LD ``mainEntityOfPage``)."""
    value = first(value)
    if isinstance(value, dict):
        value = first(value.get("url") or value.get("@id"))
    found = url(value, base)
    return found.split("#", 1)[0] if found else None


def iso_date(value: Any) -> str | None:
    """A date or a date and time in ISO 8601 (``2024-05-01``, ``2024-05-01T10:00:00+02:00``),
    read from ISO 8601 itself, RFC 2822 or a few common written forms; None otherwise."""
    written = text(value, 100)
    if not written:
        return None
    moment = _read_date(written)
    if moment is None or not EARLIEST_YEAR <= moment.year <= date.today().year + 1:
        return None
    if isinstance(moment, datetime):
        stamp = moment.replace(microsecond=0).isoformat()
        return stamp[:-6] + "Z" if stamp.endswith("+00:00") else stamp
    return moment.isoformat()


def _read_date(written: str) -> date | datetime | None:
    candidate = written.replace("Z", "+00:00") if written.endswith("Z") else written
    try:
        if len(candidate) == 10 and candidate[4] == "-":
            return date.fromisoformat(candidate)
        return datetime.fromisoformat(candidate)
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(written)
    except (TypeError, ValueError, IndexError):
        pass
    for form in _DATE_FORMATS:
        try:
            moment = datetime.strptime(written, form)
        except ValueError:
            continue
        return moment.date() if "%H" not in form else moment
    return None


def language(value: Any) -> str | None:
    """A BCP 47 tag (``en``, ``pt-BR``) from a tag, a locale (``en_US``) or a Language object."""
    value = first(value)
    if isinstance(value, dict):
        value = value.get("alternateName") or value.get("name")
    tag = text(value, 40)
    if not tag:
        return None
    tag = tag.split(",")[0].strip().replace("_", "-")
    if not _LANGUAGE.match(tag):
        return None
    parts = tag.split("-")
    primary, rest = parts[0].lower(), [p.upper() if len(p) == 2 else p for p in parts[1:]]
    return "-".join([primary, *rest])


def number(value: Any) -> int | float | None:
    """A number, or a string holding one (``"1,299.00"``, ``"19,99 €"``); None otherwise."""
    value = first(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _whole_if_whole(float(value))
    match = _NUMBER.search(value[:100]) if isinstance(value, str) else None
    if not match:
        return None
    digits = match[0].replace(" ", "").strip(".,")
    commas, dots = digits.count(","), digits.count(".")
    if commas and dots:  # the last separator is the decimal one: 1,299.00 or 1.299,00
        decimal = "." if digits.rfind(".") > digits.rfind(",") else ","
    elif commas == 1 and len(digits) - digits.rfind(",") - 1 != 3:  # 19,99
        decimal = ","
    else:  # 19.99 (schema.org's own form); 1,299 and 1.299.000 are thousands
        decimal = "." if dots == 1 else ""
    whole = "".join(c for c in digits if c.isdigit() or c == decimal).replace(",", ".")
    try:
        return _whole_if_whole(float(whole))
    except ValueError:
        return None


def _whole_if_whole(read: float) -> int | float | None:
    if not math.isfinite(read) or abs(read) >= 1e15:
        return None
    return int(read) if read.is_integer() else read


def currency(value: Any) -> str | None:
    code = text(value, 10)
    return code.upper() if code and _CURRENCY.match(code) else None


def short_type(value: str) -> str:
    """A schema.org type or property without its vocabulary (``https://schema.org/Product`` →
    ``Product``, ``schema:name`` → ``name``); other IRIs as they are."""
    return _SCHEMA_ORG.sub("", value, count=1)
