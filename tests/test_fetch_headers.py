"""Strict readers of upstream headers: a value that does not parse is absent, never an exception."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from fetch.wire import charsets, headers

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
BASE = "https://example.org/a/b?c=d"

# Header values as a site can send them: any text, and any bytes as http.client decodes them.
values = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=300).map(lambda raw: raw.decode("latin-1")),
    st.text(alphabet='0123456789 ,\t"W/-:GMTSunNovabc;=²٣', max_size=60),
)
hostile_settings = hypothesis_settings(max_examples=400, deadline=None)

ETAG_SHAPE = re.compile(r'(W/)?"[\x21\x23-\x7e\x80-\xff]*"')
IMF_FIXDATE_SHAPE = re.compile(
    r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    r"[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT"
)


# Content-Length --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("1234", 1234),
        (" 42\t", 42),
        ("10, 10", 10),
        ("10,10 , 10", 10),
        ("10, 11", None),
        ("²", None),
        ("1²", None),
        ("١٢٣", None),
        ("-1", None),
        ("+5", None),
        ("1e3", None),
        ("", None),
        ("1 2", None),
        ("9" * 20, None),
        ("0x10", None),
        (None, None),
    ],
)
def test_content_length_is_ascii_digits_only(value: str | None, expected: int | None) -> None:
    assert headers.content_length(value) == expected


@hostile_settings
@given(values)
def test_any_content_length_value_is_a_small_non_negative_int_or_absent(value: str) -> None:
    length = headers.content_length(value)

    assert length is None or (isinstance(length, int) and 0 <= length < 10**19)


# HTTP dates, Last-Modified ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"],
)
def test_each_of_the_three_http_date_forms_is_read(value: str) -> None:
    assert headers.http_date(value) == datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC)
    assert headers.last_modified(value) == "Sun, 06 Nov 1994 08:49:37 GMT"


@pytest.mark.parametrize(
    "value",
    [
        "Sun, 06 Nov 1994 08:49:37 +0000",
        "Sun, 06 Nov 1994 08:49:37",
        "Mon, 31 Feb 2020 00:00:00 GMT",
        "Sun, 06 Nov 99999 08:49:37 GMT",
        "Sun, 06 Nov 1994 25:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT\x00",
        "Sun, 06 Nov 1994 08:49:37 GMT\r\nX-Injected: 1",
        "Sun, ٠٦ Nov 1994 08:49:37 GMT",
        "yesterday",
        "1994-11-06T08:49:37Z",
        "",
    ],
)
def test_anything_but_an_http_date_is_not_a_last_modified(value: str) -> None:
    assert headers.http_date(value) is None
    assert headers.last_modified(value) is None


def test_a_leap_second_is_read_as_the_last_second_of_its_minute() -> None:
    assert headers.last_modified("Sat, 31 Dec 2016 23:59:60 GMT") == "Sat, 31 Dec 2016 23:59:59 GMT"


@hostile_settings
@given(values)
def test_any_last_modified_value_is_a_canonical_imf_fixdate_or_absent(value: str) -> None:
    result = headers.last_modified(value)

    assert result is None or IMF_FIXDATE_SHAPE.fullmatch(result)


@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(9999, 12, 31)))
def test_every_imf_fixdate_reads_back_as_the_same_moment(moment: datetime) -> None:
    moment = moment.replace(microsecond=0, tzinfo=UTC)

    assert headers.http_date(headers.imf_fixdate(moment)) == moment


# Retry-After --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        ("0", 0.0),
        (" 30 ", 30.0),
        ("600", 600.0),
        ("601", 600.0),
        ("9" * 5000, 600.0),
        ("Sun, 01 Mar 2026 12:01:00 GMT", 60.0),
        ("Sun, 01 Mar 2026 13:00:00 GMT", 600.0),
        ("Sun, 01 Mar 2026 11:00:00 GMT", 0.0),
        ("-5", None),
        ("1.5", None),
        ("²", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_seconds_or_a_date_clamped_to_retry_for(
    value: str | None, expected: float | None
) -> None:
    assert headers.retry_after(value, now=NOW, most=600) == expected


@hostile_settings
@given(values, st.floats(min_value=0, max_value=86400))
def test_any_retry_after_value_is_within_zero_and_retry_for_or_absent(value: str, most: float) -> None:
    wait = headers.retry_after(value, now=NOW, most=most)

    assert wait is None or 0 <= wait <= most


# ETag ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ['"v1"', 'W/"v1"', '""', '"abc-123/xyz"', '"caf\xe9"', ' "x" '])
def test_a_strong_or_weak_quoted_entity_tag_is_kept(value: str) -> None:
    assert headers.etag(value) == value.strip()


@pytest.mark.parametrize(
    "value",
    [
        "v1",
        '"v1',
        'w/"v1"',
        '"a"b"',
        '"v1", "v2"',
        '"a\x00b"',
        '"a\rb"',
        '"a\nb"',
        '"a b"',
        '"a\x7fb"',
        '"snow\u2603"',
        '"\ud800"',
        '"' + "x" * 300 + '"',
        "",
    ],
)
def test_anything_but_one_entity_tag_is_absent(value: str) -> None:
    assert headers.etag(value) is None


@hostile_settings
@given(values)
def test_any_etag_value_is_a_well_formed_short_entity_tag_or_absent(value: str) -> None:
    result = headers.etag(value)

    assert result is None or (ETAG_SHAPE.fullmatch(result) and len(result) <= headers.MAX_ETAG)
    if result is not None:
        result.encode("latin-1")  # sendable back as If-None-Match


# Content-Type -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("text/html", ("text/html", None)),
        ('Text/HTML; Charset="UTF-8"', ("text/html", "utf-8")),
        ("text/html;charset=latin1", ("text/html", "latin1")),
        ("text/html; charset=utf-8; charset=koi8-r", ("text/html", "utf-8")),
        ("text/html; foo; charset=sjis", ("text/html", "sjis")),
        ('text/plain; a="x;y"; charset=ascii', ("text/plain", "ascii")),
        ("text/html; charset=rot13", ("text/html", None)),
        ("text/html; charset=base64", ("text/html", None)),
        ("text/html; charset=punycode", ("text/html", None)),
        ("text/html; charset=", ("text/html", None)),
        ("application/vnd.api+json", ("application/vnd.api+json", None)),
        ("text", ("", None)),
        ("text/", ("", None)),
        ("/html", ("", None)),
        ("text/ht ml", ("", None)),
        ("téxt/html", ("", None)),
        ("text/html\x00", ("", None)),
        ("a/" + "b" * 200, ("", None)),
        ("", ("", None)),
        (None, ("", None)),
    ],
)
def test_content_type_is_a_token_pair_and_a_whatwg_charset(
    value: str | None, expected: tuple[str, str | None]
) -> None:
    assert headers.content_type(value) == expected


@hostile_settings
@given(values)
def test_any_content_type_value_is_a_token_pair_or_absent(value: str) -> None:
    media, charset = headers.content_type(value)

    assert media == "" or re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9a-z]+/[!#$%&'*+\-.^_`|~0-9a-z]+", media)
    assert len(media) <= headers.MAX_MEDIA_TYPE
    assert charset is None or charsets.lookup(charset) is not None


# Location -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/new", "https://example.org/new"),
        ("c", "https://example.org/a/c"),
        ("http://other.test/x", "http://other.test/x"),
        ("/a b", "https://example.org/a%20b"),
        ("/caf\xc3\xa9", "https://example.org/caf%C3%A9"),  # UTF-8 bytes, decoded as latin-1
        ("  /padded  ", "https://example.org/padded"),
    ],
)
def test_a_location_is_joined_to_the_current_url(value: str, expected: str) -> None:
    assert headers.location(value, BASE) == expected


@pytest.mark.parametrize(
    "value",
    [
        "http://[::1",
        "http://[oops]/",
        "/a\tb",
        "/a\r\nSet-Cookie: x=1",
        "/a\x00b",
        "/a\x7fb",
        "/snow\u2603",
        "/" + "x" * 5000,
        "",
        "   ",
        None,
    ],
)
def test_an_unusable_location_is_absent(value: str | None) -> None:
    assert headers.location(value, BASE) is None


@hostile_settings
@given(values)
def test_any_location_value_is_a_url_without_controls_or_absent(value: str) -> None:
    result = headers.location(value, BASE)

    if result is not None:
        assert not re.search(r"[\x00-\x20\x7f-\uffff]", result)
        urlsplit(result)  # splits without ValueError


def test_a_two_digit_rfc850_year_is_read_as_the_nearest_past_or_near_future_year() -> None:
    this_year = datetime.now(UTC).year

    assert headers.http_date(f"Sunday, 06-Nov-{this_year % 100:02d} 08:49:37 GMT") == datetime(
        this_year, 11, 6, 8, 49, 37, tzinfo=UTC
    )
    later = (this_year + 60) % 100  # more than 50 years ahead: the previous century's
    parsed = headers.http_date(f"Sunday, 06-Nov-{later:02d} 08:49:37 GMT")
    assert parsed is not None
    assert parsed.year == this_year + 60 - 100
