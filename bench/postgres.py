"""The local PostgreSQL the benchmarks run on: a throwaway database each, and what the server says.

The server is the one on 127.0.0.1:5432 with trust authentication for ``postgres``, as in CI.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

SERVER = "postgres://postgres@127.0.0.1:5432"
SETTINGS = ("server_version", "fsync", "synchronous_commit", "shared_buffers")


def execute(*statements: str, database: str = "postgres") -> list[tuple[Any, ...]]:
    """Run statements in autocommit, on the maintenance database unless told; rows of the last one."""
    import psycopg

    with psycopg.connect(f"{SERVER}/{database}", autocommit=True) as conn:
        rows: list[tuple[Any, ...]] = []
        for statement in statements:
            cursor = conn.execute(statement)
            rows = cursor.fetchall() if cursor.description else []
        return rows


def server_settings(*extra: str) -> str:
    """The settings that decide what a commit costs, as one line for the report's header."""
    names = (*SETTINGS, *extra)
    return ", ".join(f"{name}={execute(f'SHOW {name}')[0][0]}" for name in names)


@dataclass(frozen=True)
class BenchDatabase:
    name: str

    @property
    def url(self) -> str:
        return f"{SERVER}/{self.name}"

    def recreate(self) -> None:
        # FORCE: sessions left behind by a run that was killed outright would block the drop.
        execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)", f"CREATE DATABASE {self.name}")

    def drop(self) -> None:
        execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")

    @contextmanager
    def fresh(self) -> Iterator[BenchDatabase]:
        """This database, empty; dropped again on the way out, also on an error or Ctrl-C."""
        self.recreate()
        try:
            yield self
        finally:
            self.drop()

    def backend_pids(self) -> list[int]:
        """The server processes of the sessions on this database: their CPU is the benchmark's."""
        rows = execute(f"SELECT pid FROM pg_stat_activity WHERE datname = '{self.name}'")
        return [pid for (pid,) in rows]
