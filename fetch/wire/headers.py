"""Strict readers of the upstream response headers sift acts on.

An upstream is an attacker, and http.client hands header values over as whatever latin-1 text
the bytes make. Each reader here takes that text (or ``None``) and returns a well-formed value,
or ``None`` (``""`` for a media type) when the value does not parse: a header that does not parse
is treated as absent, and no reader ever raises. ``client``, ``pipeline`` and ``cache`` read
``Retry-After``, ``Content-Length``, ``Content-Type``, ``ETag``, ``Last-Modified`` and
``Location`` only through this module. See docs/fetch-client.md for the grammar each accepts.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import quote, urljoin

from fetch.limits import MAX_LOCATION_CHARS
from fetch.wire import charsets

# RFC 9110's optional whitespace, and the wider set WHATWG strips around a media type.
_OWS = " \t"
_HTTP_WHITESPACE = " \t\r\n"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NAME_END = re.compile("[=;]")
_VALUE_END = re.compile(";")
# A length of up to 19 digits fits any body; a longer number, zeros or not, is absurd.
_DIGITS = re.compile(r"[0-9]{1,19}")
_MAX_CONTENT_LENGTH_HEADER = 200
_MAX_MEDIA_TYPE_HEADER = 1024
MAX_MEDIA_TYPE = 127  # RFC 6838 caps a type or subtype name at 127; real ones are far shorter
# etagc: "!" or "#" to "~", or obs-text (0x80-0xFF, which latin-1 text carries as U+0080-U+00FF).
_ETAG = re.compile(r'(?:W/)?"[\x21\x23-\x7e\x80-\xff]*"')
MAX_ETAG = 256
_LOCATION_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f]")
# The characters of a URL left as they are; anything else (non-ASCII bytes) is percent-encoded.
_URL_SAFE = "".join(chr(code) for code in range(0x21, 0x7F))

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_LONG_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_TIME = r"([0-9]{2}):([0-9]{2}):([0-9]{2})"
_MONTH = "(" + "|".join(_MONTHS) + ")"
# The three forms of RFC 9110 section 5.6.7, exactly; the weekday is not checked against the date.
_IMF_FIXDATE = re.compile(rf"(?:{'|'.join(_WEEKDAYS)}), ([0-9]{{2}}) {_MONTH} ([0-9]{{4}}) {_TIME} GMT")
_RFC850_DATE = re.compile(rf"(?:{'|'.join(_LONG_WEEKDAYS)}), ([0-9]{{2}})-{_MONTH}-([0-9]{{2}}) {_TIME} GMT")
_ASCTIME_DATE = re.compile(rf"(?:{'|'.join(_WEEKDAYS)}) {_MONTH} ([ 0-9][0-9]) {_TIME} ([0-9]{{4}})")
_MAX_DATE = 64


def content_length(value: str | None) -> int | None:
    """ASCII digits only; repeated equal values (``"10, 10"``) count once, differing ones are absent.

    ``str.isdigit()`` would accept ``"²"`` or other Unicode digits, which ``int()`` then refuses.
    """
    if value is None or len(value) > _MAX_CONTENT_LENGTH_HEADER:
        return None
    lengths = {part.strip(_OWS) for part in value.split(",")}
    if len(lengths) != 1:
        return None
    (length,) = lengths
    return int(length) if _DIGITS.fullmatch(length) else None


def http_date(value: str | None) -> datetime | None:
    """An IMF-fixdate, RFC 850 or asctime date (RFC 9110), in UTC; anything else is ``None``."""
    if value is None or len(value) > _MAX_DATE:
        return None
    text = value.strip(_OWS)
    if match := _IMF_FIXDATE.fullmatch(text):
        day, month, year, hour, minute, second = match.groups()
    elif match := _RFC850_DATE.fullmatch(text):
        day, month, short_year, hour, minute, second = match.groups()
        year = str(_full_year(int(short_year)))
    elif match := _ASCTIME_DATE.fullmatch(text):
        month, day, hour, minute, second, year = match.groups()
    else:
        return None
    try:
        return datetime(
            int(year),
            _MONTHS.index(month) + 1,
            int(day),
            int(hour),
            int(minute),
            min(int(second), 59),  # a leap second is the last second of its minute
            tzinfo=UTC,
        )
    except ValueError:  # 31 February, hour 25, year 0
        return None


def _full_year(short: int) -> int:
    """RFC 9110: a two-digit year more than 50 years ahead is the most recent past such year."""
    this_year = datetime.now(UTC).year
    year = this_year - this_year % 100 + short
    return year - 100 if year > this_year + 50 else year


def imf_fixdate(when: datetime) -> str:
    """``Sun, 06 Nov 1994 08:49:37 GMT``: English names whatever the locale."""
    when = when.astimezone(UTC)
    return (
        f"{_WEEKDAYS[when.weekday()]}, {when.day:02d} {_MONTHS[when.month - 1]} {when.year:04d} "
        f"{when.hour:02d}:{when.minute:02d}:{when.second:02d} GMT"
    )


def last_modified(value: str | None) -> str | None:
    """A valid HTTP date, in its canonical IMF-fixdate form, ready to send as ``If-Modified-Since``."""
    when = http_date(value)
    return imf_fixdate(when) if when is not None else None


def retry_after(value: str | None, *, now: datetime, most: float) -> float | None:
    """Seconds to wait: a number of seconds or an HTTP date, clamped to ``[0, most]``."""
    if value is None:
        return None
    text = value.strip(_OWS)
    if text.isascii() and text.isdigit():
        # Compared as text first: int() of thousands of digits is slow, and refused over 4300.
        return float(most) if len(text) > 12 else min(float(int(text)), float(most))
    when = http_date(text)
    if when is None:
        return None
    return max(0.0, min((when - now).total_seconds(), float(most)))


def etag(value: str | None) -> str | None:
    """A strong (``"x"``) or weak (``W/"x"``) entity tag of allowed characters, at most 256 long."""
    if value is None:
        return None
    text = value.strip(_OWS)
    if len(text) > MAX_ETAG or not _ETAG.fullmatch(text):
        return None
    return text


def content_type(value: str | None) -> tuple[str, str | None]:
    """``(media type, charset label)``, both lower-case; ``("", None)`` when the value is malformed.

    Parsed as WHATWG's "parse a MIME type" does: the type and subtype must be RFC 9110 tokens;
    a malformed parameter is skipped, the first ``charset`` wins, and a charset that is not a
    label of the WHATWG Encoding Standard is dropped.
    """
    if value is None or len(value) > _MAX_MEDIA_TYPE_HEADER:
        return "", None
    essence, _, parameters = value.strip(_HTTP_WHITESPACE).partition(";")
    essence = essence.rstrip(_HTTP_WHITESPACE)
    kind, slash, subtype = essence.partition("/")
    if not (slash and _TOKEN.fullmatch(kind) and _TOKEN.fullmatch(subtype)) or len(essence) > MAX_MEDIA_TYPE:
        return "", None
    return essence.lower(), charsets.normalized(_parameters(parameters).get("charset"))


def _parameters(text: str) -> dict[str, str]:
    """Media type parameters; the first of each name wins, malformed ones are skipped."""
    found: dict[str, str] = {}
    position = 0
    while position < len(text):
        name_end = _next(_NAME_END, text, position)
        name = text[position:name_end].lstrip(_HTTP_WHITESPACE).lower()
        if name_end >= len(text) or text[name_end] == ";":
            position = name_end + 1
            continue
        value, position = _parameter_value(text, name_end + 1)
        if name and _TOKEN.fullmatch(name) and value and name not in found:
            found[name] = value
    return found


def _parameter_value(text: str, start: int) -> tuple[str, int]:
    """The value starting at ``start`` (a token or a quoted string) and where the next one starts."""
    if text[start : start + 1] != '"':
        end = _next(_VALUE_END, text, start)
        return text[start:end].rstrip(_HTTP_WHITESPACE), end + 1
    value, position = [], start + 1
    while position < len(text) and text[position] != '"':
        if text[position] == "\\" and position + 1 < len(text):
            position += 1
        value.append(text[position])
        position += 1
    return "".join(value), _next(_VALUE_END, text, position) + 1


def _next(stop: re.Pattern[str], text: str, start: int) -> int:
    found = stop.search(text, start)
    return found.start() if found else len(text)


def location(value: str | None, base: str) -> str | None:
    """The absolute URL a redirect points to, or ``None`` when ``Location`` is unusable.

    Spaces are percent-encoded, as browsers do, and so are non-ASCII bytes (a server writing
    UTF-8 into the header); other whitespace or control characters, an over-long value, or a URL
    Python cannot split (``http://[::1``) make it absent.
    """
    if value is None or len(value) > MAX_LOCATION_CHARS:
        return None
    text = value.strip(_OWS)
    if not text or _LOCATION_FORBIDDEN.search(text):
        return None
    try:
        raw = text.encode("latin-1")  # what the server sent; http.client decoded it as latin-1
        return urljoin(base, quote(raw, safe=_URL_SAFE))
    except (UnicodeEncodeError, ValueError):
        return None
