"""Django's ``LOGGING`` for every process of the deployment (docs/operations.md, "Logs"): one
console handler in the chosen format, back-pressure answers (429, 503) not logged as errors,
access lines without query strings and probes at DEBUG, and the libraries that chatter or name
URLs kept quiet."""

from __future__ import annotations

from typing import Any

from sift_site.log_lines import QUIET_LIBRARIES


def logging_settings(log_format: str, level: str) -> dict[str, Any]:
    """``LOGGING`` for ``log_format`` (text or json) and the root ``level`` (upper case)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "line": {"()": "sift_site.log_lines.formatter", "log_format": log_format},
        },
        "filters": {
            # 429 and 503 are back-pressure the API answers on purpose, with Retry-After; logging
            # each as a warning or an error would bury real errors under a retry storm.
            "not_back_pressure": {
                "()": "django.utils.log.CallbackFilter",
                "callback": lambda record: getattr(record, "status_code", None) not in (429, 503),
            },
            "path_only": {"()": "sift_site.access_log.PathOnly"},
            "probes_at_debug": {"()": "sift_site.access_log.ProbesAtDebug"},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "line",
                "filters": ["not_back_pressure"],
            },
        },
        "root": {"handlers": ["console"], "level": level},
        # These libraries name hosts and URLs, or chatter, in their messages; logs keep URLs out.
        "loggers": {
            **{name: {"level": "ERROR"} for name in QUIET_LIBRARIES},
            # uvicorn's own lines through sift's handler (the mcp process; gunicorn's uvicorn worker
            # hands them to gunicorn's handlers, which sift_site/gunicorn_hooks.py formats alike).
            "uvicorn": {"handlers": ["console"], "level": level, "propagate": False},
            # Its access lines: paths without query strings, and scrapes of /metrics and /healthz at
            # DEBUG (sift_site/access_log.py).
            "uvicorn.access": {
                "filters": ["path_only", "probes_at_debug"],
                "level": level,
                "propagate": True,
            },
            # django-q2 says at INFO every task it queues or runs and every schedule it fires: the
            # cluster's own chatter, every minute with no work at all. sift logs the events that
            # matter itself (jobs, targets, processes started and stopped).
            "django-q": {"level": "DEBUG" if level == "DEBUG" else "WARNING"},
        },
    }
