"""Charsets: the labels of the WHATWG Encoding Standard and no other, never a Python-only codec."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from fetch.documents.sniff import declared_charset, decode_text
from fetch.wire import charsets

# Python codecs no page may choose: not text encodings at all, or text encodings no browser has.
PYTHON_ONLY = [
    "punycode",
    "idna",
    "rot13",
    "rot_13",
    "base64",
    "base64_codec",
    "hex",
    "hex_codec",
    "zlib",
    "zlib_codec",
    "uu",
    "uu_codec",
    "bz2",
    "bz2_codec",
    "quopri",
    "quopri_codec",
    "utf-7",
    "utf_7",
    "raw_unicode_escape",
    "unicode_escape",
    "undefined",
    "mbcs",
    "oem",
    "palmos",
    "cp037",
    "utf-32",
]
# Names Python knows as aliases of fine codecs, but that are not WHATWG labels.
PYTHON_ALIASES = ["latin_1", "iso8859_1", "utf_8", "u8", "cp65001", "shiftjis", "eucjp", "  utf-8  x"]
ALLOWED_CODECS = {encoding.codec for encoding in charsets.ENCODINGS.values()}
SAMPLE = "Café \u2013 naïve déjà vu 123 <p>".encode()
ASCII_WHITESPACE = "\t\n\x0c\r "


def _codec_name(name: str) -> str | None:
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def test_every_mapped_codec_is_a_text_codec_and_none_is_python_only() -> None:
    forbidden = {_codec_name(name) for name in PYTHON_ONLY} - {None}
    for codec in ALLOWED_CODECS - {""}:
        assert codecs.lookup(codec)._is_text_encoding
        assert _codec_name(codec) not in forbidden


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("latin1", "windows-1252"),
        ("iso-8859-1", "windows-1252"),
        ("ascii", "windows-1252"),
        ("us-ascii", "windows-1252"),
        ("utf8", "UTF-8"),
        ("unicode-1-1-utf-8", "UTF-8"),
        ("sjis", "Shift_JIS"),
        ("x-user-defined", "x-user-defined"),
        ("iso-2022-kr", "replacement"),
        ("csiso2022kr", "replacement"),
        ("hz-gb-2312", "replacement"),
        ("utf-16", "UTF-16LE"),
        ("utf-16le", "UTF-16LE"),
        ("utf-16be", "UTF-16BE"),
        ("gb2312", "GBK"),
        ("koi8-r", "KOI8-R"),
        ("windows-1251", "windows-1251"),
    ],
)
def test_a_whatwg_label_names_its_encoding(label: str, name: str) -> None:
    encoding = charsets.lookup(label)

    assert encoding is not None
    assert encoding.name == name


@pytest.mark.parametrize("label", PYTHON_ONLY + PYTHON_ALIASES)
def test_a_python_codec_name_is_not_a_label(label: str) -> None:
    assert charsets.lookup(label) is None


@pytest.mark.parametrize("label", PYTHON_ONLY)
def test_a_python_only_charset_is_ignored_and_the_body_read_as_utf8(label: str) -> None:
    assert decode_text(SAMPLE, label) == SAMPLE.decode("utf-8")
    assert declared_charset(f"text/html; charset={label}") is None


@pytest.mark.parametrize("label", sorted(charsets.LABELS))
def test_every_whatwg_label_decodes_text(label: str) -> None:
    encoding = charsets.LABELS[label]

    assert isinstance(encoding.decode(SAMPLE, "replace"), str)
    assert isinstance(decode_text(SAMPLE, label), str)


@given(
    label=st.sampled_from(sorted(charsets.LABELS)),
    before=st.text(alphabet=ASCII_WHITESPACE, max_size=3),
    after=st.text(alphabet=ASCII_WHITESPACE, max_size=3),
    upper=st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_labels_match_ascii_case_insensitively_around_ascii_whitespace(
    label: str, before: str, after: str, upper: list[bool]
) -> None:
    spelled = "".join(c.upper() if flip else c for c, flip in zip(label, upper, strict=False))

    assert charsets.lookup(before + spelled + label[len(spelled) :] + after) == charsets.LABELS[label]


@pytest.mark.parametrize("label", ["\u212aoi8-r", "utf\u20128", "\u0131so-8859-2", "\xa0utf-8", "utf-8\x0b"])
def test_non_ascii_case_folds_and_other_whitespace_do_not_make_a_label(label: str) -> None:
    assert charsets.lookup(label) is None


@hypothesis_settings(max_examples=500, deadline=None)
@given(label=st.one_of(st.text(max_size=40), st.sampled_from(PYTHON_ONLY)), body=st.binary(max_size=200))
def test_any_label_never_raises_and_never_picks_a_python_only_codec(label: str, body: bytes) -> None:
    encoding = charsets.lookup(label)

    assert encoding is None or encoding.codec in ALLOWED_CODECS
    assert isinstance(decode_text(body, label), str)
    assert declared_charset(f"text/html; charset={label}") in (None, *charsets.LABELS)
    assert charsets.normalized(label) in (None, *charsets.LABELS)


def test_a_replacement_label_decodes_to_one_replacement_character() -> None:
    assert decode_text(b"\x1b$)Cany bytes at all", "iso-2022-kr") == "\ufffd"
    assert decode_text(b"", "hz-gb-2312") == ""


def test_x_user_defined_maps_high_bytes_to_the_private_use_area() -> None:
    assert decode_text(b"ab\x80\xff", "x-user-defined") == "ab\uf780\uf7ff"


def test_latin1_labels_decode_as_windows_1252_as_browsers_do() -> None:
    assert decode_text(b"\x93quoted\x94 \x80", "iso-8859-1") == "\u201cquoted\u201d \u20ac"


def test_utf16_labels_decode_utf16_text() -> None:
    assert decode_text("héllo".encode("utf-16-le"), "utf-16") == "héllo"
    assert decode_text("héllo".encode("utf-16-be"), "UTF-16BE") == "héllo"


def test_an_unknown_label_falls_back_to_sniffing_a_meta_charset() -> None:
    page = '<meta charset="windows-1251"><p>Привет</p>'.encode("cp1251")

    assert "Привет" in decode_text(page, "klingon")


def test_a_meta_charset_that_is_python_only_is_ignored() -> None:
    page = b'<meta charset="rot13"><p>plain text</p>'

    assert decode_text(page, None) == page.decode()


def test_a_utf16_meta_charset_means_utf8_as_in_the_html_prescan() -> None:
    page = '<meta charset="utf-16"><p>café</p>'.encode()

    assert "café" in decode_text(page, None)
