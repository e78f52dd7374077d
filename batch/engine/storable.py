"""Make what a worker stores fit the database, whatever the fetch function handed back.

PostgreSQL refuses NUL in ``text`` and ``jsonb``, psycopg refuses to encode a lone surrogate,
and SQLite stores either as garbage; ``jsonb`` also refuses ``NaN``. A jq program can produce
any of these, so nothing the fetch side returns is trusted: every string is cleaned and cut,
every value becomes plain JSON (see ``docs/workers.md``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

# Errors and hints are short sentences for an agent; anything longer is noise or an attack.
ERROR_MAX_CHARS = 1000
HINT_MAX_CHARS = 1000
# A string inside ``meta`` (titles, URLs, types) or a key anywhere; ``content`` is not cut here.
META_MAX_CHARS = 65536
KEY_MAX_CHARS = 256
# Deeper than this is no envelope sift makes; it also stops a self-referencing structure.
MAX_DEPTH = 64
# jsonb stores numbers of any size, but Python refuses to print an int of more than 4300 digits.
MAX_INT = 2**63

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
CUT_MARK = "…"


def storable_text(text: str, max_chars: int | None = None) -> str:
    """``text`` without NUL, with each lone surrogate replaced by U+FFFD, cut to ``max_chars``."""
    if max_chars is not None and len(text) > max_chars:
        # Cut first: cleaning a 10 MB error only to throw most of it away is wasted work.
        text = text[: max_chars - len(CUT_MARK)] + CUT_MARK
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not text.isascii() and not _encodes(text):
        text = _LONE_SURROGATE.sub("\ufffd", text)
    return text


def _encodes(text: str) -> bool:
    # Encoding is a fast C loop that fails exactly on a lone surrogate; the regex only runs then.
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def storable_json(value: object, max_chars: int | None = META_MAX_CHARS) -> Any:
    """``value`` as plain JSON that both databases store: cleaned strings and keys, no NaN.

    Sets and tuples become lists, bytes become text, numbers that JSON cannot hold become
    ``null``, anything else its ``str``; deeper than ``MAX_DEPTH`` or a cycle becomes ``null``.
    """
    return _storable(value, max_chars, depth=0, path=set())


def storable_result(result: object) -> dict[str, Any]:
    """A fetch result: a mapping whose ``content`` and ``screenshot`` are cleaned but not cut,
    everything else as meta."""
    if not isinstance(result, Mapping):
        raise TypeError(f"a result must be a mapping, not {type(result).__name__}")
    cleaned: dict[str, Any] = {}
    for key, value in result.items():
        name = _storable_key(key)
        cleaned[name] = _storable(
            value, None if name in ("content", "screenshot") else META_MAX_CHARS, depth=1, path=set()
        )
    return cleaned


def json_bytes(value: object) -> int:
    """The size of a storable value as UTF-8 JSON, the unit of ``n_bytes`` and the byte budget."""
    return len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode())


def _storable(value: object, max_chars: int | None, *, depth: int, path: set[int]) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return _storable_number(value)
    if isinstance(value, Mapping | list | tuple | set | frozenset):
        return _storable_container(value, max_chars, depth=depth, path=path)
    return storable_text(_text_of(value), max_chars)


def _storable_container(value: object, max_chars: int | None, *, depth: int, path: set[int]) -> Any:
    if depth >= MAX_DEPTH or id(value) in path:
        return None
    path.add(id(value))
    try:
        if isinstance(value, Mapping):
            items = value.items()
            return {_storable_key(k): _storable(v, max_chars, depth=depth + 1, path=path) for k, v in items}
        assert isinstance(value, list | tuple | set | frozenset)
        return [_storable(item, max_chars, depth=depth + 1, path=path) for item in value]
    finally:
        path.discard(id(value))


def _storable_number(value: float) -> float | None:
    if isinstance(value, int) and -MAX_INT <= value < MAX_INT:
        return value
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _storable_key(key: object) -> str:
    # The same text json.dumps would write for a non-string key, then cleaned like any string.
    text = json.dumps(key) if key is None or isinstance(key, bool) else _text_of(key)
    return storable_text(text, KEY_MAX_CHARS)


def _text_of(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    try:
        return str(value)
    except Exception:
        return f"<{type(value).__name__}>"
