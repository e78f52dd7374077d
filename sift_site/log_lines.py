"""How every process of sift writes its log lines (docs/operations.md, "Logs").

``LOG_FORMAT=text`` (the default) is one human-readable line a record; ``LOG_FORMAT=json`` is one
JSON object a line: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, ``pid``, and
what the line concerns when it is known: the ``request_id`` of the request being served, the
``job`` and ``target`` a worker or a webhook sender is busy with (``concerning``), an
``exception``'s traceback.

Standard library only: the sandbox child and the render process, which run without Django or the
rest of sift and start with an empty environment, are handed ``LOG_FORMAT`` and ``LOG_LEVEL``
(``handed_on``) and set their logging up with ``configure_isolated``.
"""

from __future__ import annotations

import contextvars
import json
import logging
import logging.config
import re
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TextIO

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# They name hosts and URLs, or chatter, in their messages: only their errors are logged.
QUIET_LIBRARIES = ("urllib3", "trafilatura", "htmldate", "courlan", "bm25s")

# The request being served, and what a line concerns (job, target, delivery), for JSON lines.
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("sift_request_id", default=None)
_CONCERNING: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("sift_concerning", default={})  # noqa: B039 — never mutated, only replaced
# A caller's own X-Request-ID is kept when it is this: short printable ASCII without spaces, so
# that it cannot forge a second line or bloat every one; otherwise sift makes one.
_WELL_FORMED_ID = re.compile(r"[A-Za-z0-9._:/+=@-]{1,128}")


def request_id_from(given: str | None) -> str:
    """The caller's ``X-Request-ID`` when it is well formed, else a new random one."""
    if given is not None and _WELL_FORMED_ID.fullmatch(given):
        return given
    return uuid.uuid4().hex


@contextmanager
def concerning(**fields: Any) -> Iterator[None]:
    """Lines logged inside this block carry ``fields`` (``job=…``, ``target=…``) in JSON."""
    token = _CONCERNING.set({**_CONCERNING.get(), **fields})
    try:
        yield
    finally:
        _CONCERNING.reset(token)


class JsonLines(logging.Formatter):
    """One JSON object a line; a traceback is a field of it, never a line of its own."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        request_id = REQUEST_ID.get()
        if request_id is not None:
            line["request_id"] = request_id
        line.update(_CONCERNING.get())
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str)


def configure(config: dict[str, Any]) -> None:
    """``settings.LOGGING_CONFIG``: Django's dictConfig, and warnings logged (``py.warnings``)
    rather than printed, so that they are lines in the format too."""
    logging.config.dictConfig(config)
    logging.captureWarnings(True)


def formatter(log_format: str) -> logging.Formatter:
    return JsonLines() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


def handed_on(log_format: str, level: str) -> dict[str, str]:
    """The environment a process started with none of this one's needs to log as it does."""
    return {"LOG_FORMAT": log_format, "LOG_LEVEL": level}


def configure_isolated(environ: dict[str, str], stream: TextIO | None = None) -> None:
    """Logging of a process without Django (the sandbox child, the render process): to ``stream``
    (stderr), in the format and at the level ``environ`` hands on (``handed_on``), else as text at
    INFO; libraries that name hosts log only errors, as in ``settings.LOGGING``."""
    log_format = environ.get("LOG_FORMAT", "text")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter(log_format if log_format in FORMATS else "text"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    level = environ.get("LOG_LEVEL", "INFO").upper()
    root.setLevel(level if level in logging.getLevelNamesMapping() else logging.INFO)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.ERROR)
