"""A cursor for the plain SQL statements every API request sends: prepared once on PostgreSQL.

Django binds parameters on the client, into the SQL text, which psycopg never prepares: the
server parses and plans the same statements again for each request. The submit's look (five
subqueries) cost PostgreSQL 0.29 ms of CPU that way, 0.08 ms prepared. Through this cursor the
server binds the parameters, and psycopg prepares a statement on its connection once it has run
``prepare_threshold`` times (settings: ``DATABASES`` ``OPTIONS``). See docs/decisions.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.db.models import Field


@contextmanager
def prepared_cursor() -> Iterator[CursorWrapper]:
    """Django's cursor wrapper (its errors, its query log) around a server-binding cursor.

    Only for statements whose names come from the models and whose values are all parameters;
    on SQLite, Django's own cursor.
    """
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            yield cursor
        return
    import psycopg  # noqa: PLC0415 - the PostgreSQL driver, present where the database is

    # What connection.cursor() does around the cursor it makes: the health check (a connection
    # that died since the last request is replaced, not used), the connection, the thread check.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    # Any: django-stubs type make_cursor's argument as Django's own wrapper, not a driver's cursor.
    raw: Any = psycopg.Cursor(connection.connection)
    wrapped = _DebugCursor(raw, connection) if connection.queries_logged else connection.make_cursor(raw)
    with wrapped as cursor:
        yield cursor


def db_time(moment: datetime) -> Any:
    """``moment`` as a parameter of a plain statement, as the ORM would send it."""
    return connection.ops.adapt_datetimefield_value(moment)


def as_read_by_the_orm(field: Field[Any, Any], value: Any) -> Any:
    """A ``field``'s ``value`` read by a plain statement, converted as the ORM converts it: by the
    database's converters, then the field's (SQLite returns booleans as integers, datetimes and
    JSON as text)."""
    col = field.get_col(field.model._meta.db_table)
    for convert in (*connection.ops.get_db_converters(col), *col.get_db_converters(connection)):
        value = convert(value, col, connection)
    return value


class _DebugCursor(CursorDebugWrapper):
    """Django's debug cursor, logging each statement as it was written (placeholders and all).

    Django logs the text the driver last sent; for a statement psycopg has prepared, it keeps
    none, and the query log (tests, debugging) would hold ``None`` for the statement's SQL.
    """

    @contextmanager
    def debug_sql(
        self,
        sql: str | None = None,
        params: Any = None,
        use_last_executed_query: bool = False,
        many: bool = False,
    ) -> Iterator[None]:
        with super().debug_sql(sql, params, use_last_executed_query=False, many=many):
            yield
