"""The character encodings sift decodes upstream text with: those of the WHATWG Encoding Standard.

https://encoding.spec.whatwg.org/ lists every label a browser accepts and the encoding each one
means. sift accepts those labels and no other: a label is matched as the standard's "get an
encoding" does (leading and trailing ASCII whitespace removed, ASCII case-insensitive), and any
other label is unknown (``lookup`` returns ``None``), so the caller sniffs instead.

Python's own codec registry is never asked about a label: it knows names that are not text
encodings at all (``base64``, ``hex``, ``zlib``, ``rot13``, ``uu``, ...) or that no page should
choose (``punycode``, ``idna``, ``utf-7``, ``unicode_escape``, ...). Each WHATWG encoding is
mapped here to a C-implemented Python codec that decodes in linear time, or to a small decoder
of its own (``replacement``, ``x-user-defined``). Where Python's codec of the same name is
narrower than the browser's, the browser's superset is used, as the standard does
(``Shift_JIS`` → cp932, ``EUC-KR`` → cp949, ``GBK`` → gb18030, ``Big5`` → big5hkscs).
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

# What WHATWG strips around a label (ASCII whitespace).
_ASCII_WHITESPACE = "\t\n\x0c\r "
# x-user-defined: bytes 0x00-0x7F are ASCII, 0x80-0xFF are U+F780-U+F7FF.
_X_USER_DEFINED_TABLE = "".join(chr(code) for code in range(0x80)) + "".join(
    chr(0xF780 + code) for code in range(0x80)
)
REPLACEMENT = "replacement"
X_USER_DEFINED = "x-user-defined"


@dataclass(frozen=True)
class Encoding:
    """A WHATWG encoding: its name and the Python codec that decodes it ("" for its own)."""

    name: str
    codec: str

    def decode(self, body: bytes, errors: str = "strict") -> str:
        if self.name == REPLACEMENT:  # a label that must never decode (cross-site scripting)
            return "\ufffd" if body else ""
        if self.name == X_USER_DEFINED:
            return codecs.charmap_decode(body, errors, _X_USER_DEFINED_TABLE)[0]
        return body.decode(self.codec, errors)

    @property
    def is_utf16(self) -> bool:
        return self.name in ("UTF-16BE", "UTF-16LE")


# (WHATWG name, Python codec, its labels), in the standard's order.
_TABLE: tuple[tuple[str, str, str], ...] = (
    ("UTF-8", "utf-8", "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8"),
    ("IBM866", "cp866", "866 cp866 csibm866 ibm866"),
    (
        "ISO-8859-2",
        "iso8859_2",
        "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2",
    ),
    (
        "ISO-8859-3",
        "iso8859_3",
        "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3",
    ),
    (
        "ISO-8859-4",
        "iso8859_4",
        "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4",
    ),
    (
        "ISO-8859-5",
        "iso8859_5",
        "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 iso_8859-5:1988",
    ),
    (
        "ISO-8859-6",
        "iso8859_6",
        "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 "
        "iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 "
        "iso_8859-6:1987",
    ),
    (
        "ISO-8859-7",
        "iso8859_7",
        "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 "
        "iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek",
    ),
    (
        "ISO-8859-8",
        "iso8859_8",
        "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 "
        "iso88598 iso_8859-8 iso_8859-8:1988 visual",
    ),
    ("ISO-8859-8-I", "iso8859_8", "csiso88598i iso-8859-8-i logical"),
    ("ISO-8859-10", "iso8859_10", "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6"),
    ("ISO-8859-13", "iso8859_13", "iso-8859-13 iso8859-13 iso885913"),
    ("ISO-8859-14", "iso8859_14", "iso-8859-14 iso8859-14 iso885914"),
    ("ISO-8859-15", "iso8859_15", "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9"),
    ("ISO-8859-16", "iso8859_16", "iso-8859-16"),
    ("KOI8-R", "koi8_r", "cskoi8r koi koi8 koi8-r koi8_r"),
    ("KOI8-U", "koi8_u", "koi8-ru koi8-u"),
    ("macintosh", "mac_roman", "csmacintosh mac macintosh x-mac-roman"),
    ("windows-874", "cp874", "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874"),
    ("windows-1250", "cp1250", "cp1250 windows-1250 x-cp1250"),
    ("windows-1251", "cp1251", "cp1251 windows-1251 x-cp1251"),
    (
        "windows-1252",
        "cp1252",
        "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 "
        "iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 "
        "x-cp1252",
    ),
    ("windows-1253", "cp1253", "cp1253 windows-1253 x-cp1253"),
    (
        "windows-1254",
        "cp1254",
        "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 "
        "iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254",
    ),
    ("windows-1255", "cp1255", "cp1255 windows-1255 x-cp1255"),
    ("windows-1256", "cp1256", "cp1256 windows-1256 x-cp1256"),
    ("windows-1257", "cp1257", "cp1257 windows-1257 x-cp1257"),
    ("windows-1258", "cp1258", "cp1258 windows-1258 x-cp1258"),
    ("x-mac-cyrillic", "mac_cyrillic", "x-mac-cyrillic x-mac-ukrainian"),
    ("GBK", "gb18030", "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk"),
    ("gb18030", "gb18030", "gb18030"),
    ("Big5", "big5hkscs", "big5 big5-hkscs cn-big5 csbig5 x-x-big5"),
    ("EUC-JP", "euc_jp", "cseucpkdfmtjapanese euc-jp x-euc-jp"),
    ("ISO-2022-JP", "iso2022_jp", "csiso2022jp iso-2022-jp"),
    ("Shift_JIS", "cp932", "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis"),
    (
        "EUC-KR",
        "cp949",
        "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 "
        "ksc5601 ksc_5601 windows-949",
    ),
    (REPLACEMENT, "", "csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr replacement"),
    ("UTF-16BE", "utf-16-be", "unicodefffe utf-16be"),
    ("UTF-16LE", "utf-16-le", "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le"),
    (X_USER_DEFINED, "", "x-user-defined"),
)

LABELS: dict[str, Encoding] = {
    label: Encoding(name, codec) for name, codec, labels in _TABLE for label in labels.split()
}
ENCODINGS: dict[str, Encoding] = {encoding.name: encoding for encoding in LABELS.values()}
UTF_8 = ENCODINGS["UTF-8"]
WINDOWS_1252 = ENCODINGS["windows-1252"]


def normalized(label: str | None) -> str | None:
    """The WHATWG label ``label`` spells (trimmed, lower-case), or ``None`` for any other string."""
    if not label:
        return None
    key = label.strip(_ASCII_WHITESPACE)
    # ASCII case-insensitive only: str.lower() would also fold, say, the Kelvin sign into "k".
    if not key.isascii():
        return None
    key = key.lower()
    return key if key in LABELS else None


def lookup(label: str | None) -> Encoding | None:
    """The encoding a WHATWG label means, or ``None`` for any other string."""
    key = normalized(label)
    return LABELS[key] if key is not None else None


def from_python_codec(name: str | None) -> Encoding | None:
    """The WHATWG encoding behind a Python codec name (a detector's guess), if there is one."""
    if not name:
        return None
    encoding = lookup(name) or lookup(name.replace("_", "-"))
    if encoding is not None:
        return encoding
    try:
        codec = codecs.lookup(name).name
    except LookupError:
        return None
    same = (each for each in ENCODINGS.values() if each.codec and codecs.lookup(each.codec).name == codec)
    return next(same, None)
