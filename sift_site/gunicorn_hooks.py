"""gunicorn server hooks for the web process (the Procfile's ``web`` line loads this module with
``--config python:sift_site.gunicorn_hooks``); its command-line options stay on that line.

Each worker starts one sandbox child (the limited processes that parse HTML, PDF and JSON) as
soon as it has been forked, in a background thread, so that the first fetch a worker serves
does not wait a second or more for a child to import its parsers; the others start on demand.
That one stays when idle, so that the first fetch after a quiet period does not wait either; the
others stop after ``SIFT_SANDBOX_IDLE`` without a parse (docs/decisions.md).

gunicorn's own lines and the access lines its uvicorn workers hand it are written by gunicorn's
handlers: ``GunicornLines`` gives them sift's format (``LOG_FORMAT``), as every other line.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from gunicorn.glogging import Logger

from sift_site.log_lines import formatter

logger = logging.getLogger(__name__)


class GunicornLines(Logger):
    """gunicorn's logger, its error and access handlers formatted as ``settings.LOG_FORMAT`` says."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")
        from django.conf import settings  # noqa: PLC0415 — read once the settings module is named

        if settings.LOG_FORMAT == "json":
            for log in (self.error_log, self.access_log):
                for handler in log.handlers:
                    handler.setFormatter(formatter("json"))


logger_class = GunicornLines


def child_exit(server: Any, worker: Any) -> None:
    """A worker gone: its share of the gauges summed over live processes (the sandbox children
    busy) leaves ``/metrics`` with it (prometheus_client's multi-process mode)."""
    from django.conf import settings  # noqa: PLC0415 — loaded in the master (--preload)
    from prometheus_client import multiprocess  # noqa: PLC0415

    if settings.SIFT_METRICS_DIR:
        multiprocess.mark_process_dead(worker.pid, settings.SIFT_METRICS_DIR)


def post_worker_init(worker: Any) -> None:
    threading.Thread(target=_warm_up_sandbox, name="sandbox-warm-up", daemon=True).start()


def _warm_up_sandbox() -> None:
    from fetch.errors import FetchError  # noqa: PLC0415
    from fetch.sandbox import pool  # noqa: PLC0415 — in the worker, once Django is set up

    try:
        pool.warm_up(children=1)
    except FetchError:
        logger.exception("could not start a sandbox child ahead of use; it starts on first use")
