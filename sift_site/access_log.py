"""The access lines of the web and mcp processes carry a request's path, never its query string:
the URL an agent asked sift to fetch (``/v1/fetch?url=…``) is the caller's business. Scrapes of
``/metrics`` and health checks (``/healthz``) come every few seconds whether or not anything
happens, so their lines are DEBUG: a quiet service writes nothing at the default level.

uvicorn writes its own access lines (gunicorn's ``--access-logformat`` does not apply to its
workers) on the ``uvicorn.access`` logger, with the path and query string as one argument;
``settings.LOGGING`` puts these filters on that logger, in both processes.
"""

from __future__ import annotations

import logging

PROBES = frozenset({"/metrics", "/healthz"})


class PathOnly(logging.Filter):
    """Cuts the query string off every argument of a record that is a path (starts with ``/``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_path_only(arg) for arg in record.args)
        return True


class ProbesAtDebug(logging.Filter):
    """A line for ``/metrics`` or ``/healthz`` becomes DEBUG, written only when the root logger
    is at DEBUG (``LOG_LEVEL=debug``); the logger itself checked its level before filtering."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if not any(isinstance(arg, str) and arg.partition("?")[0] in PROBES for arg in args):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger().isEnabledFor(logging.DEBUG)


def _path_only(arg: object) -> object:
    if isinstance(arg, str) and arg.startswith("/"):
        return arg.partition("?")[0]
    return arg
