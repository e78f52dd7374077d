"""The API's JSON parser: RFC 8259 JSON, strictly, so that bad bytes are refused with a hint."""

from __future__ import annotations

import json
import re
from typing import Any

from django.http import HttpRequest
from ninja.parser import Parser

from fetch.targets import printable


class BodyRefused(ValueError):
    """A body that is not the JSON object the API takes; ``field`` names a bad string in it."""

    def __init__(self, message: str, hint: str, field: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint
        self.field = field


def _refuse_constant(name: str) -> Any:
    raise BodyRefused(f"{name} is not valid JSON", "Send numbers as finite JSON numbers.")


class StrictJsonParser(Parser):
    """JSON as RFC 8259 says: an object, UTF-8 without a BOM, no NaN or Infinity."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        content_type = request.content_type or ""
        if content_type != "application/json" and not content_type.endswith("+json"):
            raise BodyRefused(
                f"content type {content_type or '(none)'!r} is not JSON",
                "Send the body with Content-Type: application/json.",
            )
        body = request.body
        if body.startswith(b"\xef\xbb\xbf"):
            raise BodyRefused("the body starts with a byte order mark", "Send UTF-8 JSON without a BOM.")
        data = _loads(body)
        if not isinstance(data, dict):
            raise BodyRefused(
                "the body must be a JSON object", "Send a JSON object; see /v1/docs for its fields."
            )
        if _SURROGATE_ESCAPE.search(body):
            field = _lone_surrogate_field(data)
            if field is not None:
                raise BodyRefused(
                    f"{field}: not valid Unicode text (a lone surrogate)",
                    "Send text as valid UTF-8; escape only whole characters or surrogate pairs.",
                    field,
                )
        return data


def _loads(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise BodyRefused("the body is not UTF-8", "Encode the JSON body as UTF-8.") from None
    except RecursionError:
        raise BodyRefused("the JSON is nested too deeply", "Send a flat JSON object.") from None
    except json.JSONDecodeError as exc:
        raise BodyRefused(f"the body is not valid JSON: {exc}", "Check the JSON syntax.") from None
    except ValueError:  # an integer of more digits than Python converts
        raise BodyRefused(
            "a number in the body has too many digits", "Send numbers of at most a few digits."
        ) from None


# UTF-8 cannot carry a surrogate, so a lone one can only come from a \uD800-\uDFFF escape.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _lone_surrogate_field(data: Any) -> str | None:
    """The path (``targets[0].url``) of the first key or string holding a lone surrogate."""
    pending: list[tuple[Any, str]] = [(data, "")]
    while pending:
        value, path = pending.pop()
        if isinstance(value, str) and not _is_unicode(value):
            return path or "body"
        if isinstance(value, dict):
            for key, item in reversed(value.items()):
                key_path = f"{path}.{printable(key)}" if path else printable(key)
                if not _is_unicode(key):
                    return key_path
                pending.append((item, key_path))
        elif isinstance(value, list):
            pending.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(value))))
    return None
