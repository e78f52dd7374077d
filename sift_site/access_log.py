"""The access lines of the web and mcp processes carry a request's path, never its query string:
the URL an agent asked sift to fetch (``/v1/fetch?url=…``) is the caller's business.

uvicorn writes its own access lines (gunicorn's ``--access-logformat`` does not apply to its
workers) on the ``uvicorn.access`` logger, with the path and query string as one argument;
``settings.LOGGING`` puts this filter on that logger, in both processes.
"""

from __future__ import annotations

import logging


class PathOnly(logging.Filter):
    """Cuts the query string off every argument of a record that is a path (starts with ``/``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_path_only(arg) for arg in record.args)
        return True


def _path_only(arg: object) -> object:
    if isinstance(arg, str) and arg.startswith("/"):
        return arg.partition("?")[0]
    return arg
