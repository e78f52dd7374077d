"""Telling a database that went away (a restart, a broken socket) from a statement it refused, and
waiting for it to come back: what a drain does when PostgreSQL restarts under it (docs/workers.md)."""

from __future__ import annotations

import time

from django.db import InterfaceError, OperationalError, connection

RECONNECT_SECONDS = 0.5
DATABASE_GONE = (OperationalError, InterfaceError)  # a restart: the server went away, or the socket broke
SHUTDOWN_STATES = ("57P01", "57P02", "57P03")  # admin shutdown, crash shutdown, starting up


def database_went_away(error: BaseException) -> bool:
    """A lost connection (worth waiting for), not a statement refused on a healthy one (a timeout, a
    deadlock: it would fail again)? A broken socket has no SQLSTATE; SQLite never goes away."""
    if isinstance(error, InterfaceError):
        return True
    if not isinstance(error, OperationalError):
        return False
    sqlstate = getattr(error.__cause__, "sqlstate", None)
    if sqlstate is not None:
        return bool(sqlstate.startswith("08") or sqlstate in SHUTDOWN_STATES)
    return connection.vendor == "postgresql"


def wait_for_database(until: float) -> bool:
    """Reconnect every half second until the database answers (``True``) or ``until`` passes."""
    while True:
        connection.close()  # a broken connection is never reused; a new one is made on demand
        try:
            connection.ensure_connection()
            return True
        except DATABASE_GONE:
            if time.monotonic() >= until:
                return False
            time.sleep(RECONNECT_SECONDS)
