"""Benchmark: one worker's per-target cycle, counted in this process: statements, commits, CPU.

    .venv/bin/python -m bench.cycle [--database postgresql|sqlite] [--targets 32] [--runs 5]
                                    [--history 3] [--statements]

It makes a fresh database (``sift_bench_cycle`` on the local PostgreSQL, or a SQLite file in a
temporary directory), migrates it, issues a caller, and drains ``--history`` jobs and then
``--runs`` measured jobs of ``--targets`` targets with ``batch.engine.worker.drain`` and the no-op
fetch (``bench.noop.noop``) in this process: claim, no-op fetch, store, eviction, next claim,
the cycle ``bench/scheduling.py`` times through the real cluster, without the cluster.

Per target it prints the SQL statements (``BEGIN`` and ``COMMIT`` apart), the commits, the time
spent waiting on the database for the statements, and this process's CPU and wall time. The
counts do not depend on the machine; the CPU moves less with other programs' load than the
wall time does, which is why this bench exists beside ``bench/scheduling.py``. ``--statements``
adds a line per kind of statement. The PostgreSQL database is dropped at the end.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import harness
from bench.postgres import BenchDatabase, server_settings
from bench.stats import median

DATABASE = BenchDatabase("sift_bench_cycle")
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
TABLE = re.compile(r'(?:FROM|UPDATE|INTO)\s+"(\w+)"')


@dataclass
class SqlTally:
    """Every statement one drain sent: how many of each kind, and the wall time spent in them."""

    seconds: float = 0.0
    kinds: Counter[str] = field(default_factory=Counter)

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - began
            kind = statement_kind(sql)
            if not kind.startswith(TRANSACTION_CONTROL):
                self.kinds[kind] += 1


def statement_kind(sql: str) -> str:
    """``UPDATE batch_batchjob``, ``SELECT batch_workerslot``: the verb and the table it reads or writes."""
    verb = sql.split(None, 1)[0].upper()
    table = TABLE.search(sql)
    return f"{verb} {table.group(1)}" if table else verb


@dataclass(frozen=True)
class Drained:
    targets: int
    statements: int
    commits: int
    sql_ms: float
    cpu_ms: float
    wall_ms: float
    kinds: Counter[str]

    def per_target(self, value: float) -> float:
        return value / self.targets


@contextmanager
def counting_commits(connection: Any) -> Iterator[list[int]]:
    """Count the commits of ``connection`` (a commit never passes through ``execute_wrapper``)."""
    commits = [0]
    commit = connection._commit

    def counted() -> None:
        commits[0] += 1
        commit()

    connection._commit = counted
    try:
        yield commits
    finally:
        del connection._commit  # the class's method again


def drain_one_job(caller: Any, label: str, n_targets: int) -> Drained:
    from django.db import connections

    from batch import jobs
    from batch.engine import worker
    from bench.noop import noop
    from doors.validation import validate_targets

    targets: list[object] = [f"https://{label}.bench.invalid/{i}" for i in range(n_targets)]
    jobs.submit(caller, validate_targets(targets))
    connection = connections["default"]
    tally = SqlTally()
    with counting_commits(connection) as commits, connection.execute_wrapper(tally):
        wall, cpu = time.perf_counter(), time.process_time()
        ran = worker.drain(noop, budget=600)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if ran != n_targets:
        raise RuntimeError(f"the drain ran {ran} targets of {n_targets}")
    return Drained(
        targets=ran,
        statements=sum(tally.kinds.values()),
        commits=commits[0],
        sql_ms=tally.seconds * 1000,
        cpu_ms=cpu * 1000,
        wall_ms=wall * 1000,
        kinds=tally.kinds,
    )


# --- the table -------------------------------------------------------------------------------

COLUMNS = (
    ("statements", "statements"),
    ("commits", "commits"),
    ("sql_ms", "SQL ms"),
    ("cpu_ms", "CPU ms"),
    ("wall_ms", "wall ms"),
)


def print_header() -> None:
    print("per target".ljust(10) + "".join(f"{title:>12}" for _, title in COLUMNS))


def print_row(label: str, drained: Drained) -> None:
    cells = "".join(f"{drained.per_target(getattr(drained, name)):>12.2f}" for name, _ in COLUMNS)
    print(f"{label:<10}{cells}")


def print_summary(measured: list[Drained], show_statements: bool) -> None:
    medians = {name: median(d.per_target(getattr(d, name)) for d in measured) for name, _ in COLUMNS}
    print("median".ljust(10) + "".join(f"{medians[name]:>12.2f}" for name, _ in COLUMNS))
    if show_statements:
        total = sum((d.kinds for d in measured), Counter())
        n_targets = sum(d.targets for d in measured)
        print("\nstatements per target, by kind:")
        for kind, count in total.most_common():
            print(f"  {kind:<32}{count / n_targets:>6.2f}")


# --- main ------------------------------------------------------------------------------------


@contextmanager
def database(kind: str) -> Iterator[str]:
    """The URL of a fresh database of ``kind``, gone again on the way out."""
    if kind == "postgresql":
        with DATABASE.fresh():
            yield DATABASE.url
        return
    with tempfile.TemporaryDirectory(prefix="sift-bench-cycle-") as tmp:
        yield f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--targets", type=int, default=32, help="targets per job (default 32)")
    parser.add_argument("--runs", type=int, default=5, help="measured jobs (default 5)")
    parser.add_argument("--history", type=int, default=3, help="jobs drained before, unmeasured (default 3)")
    parser.add_argument("--statements", action="store_true", help="statements per target by kind")
    return parser.parse_args()


def bench(args: argparse.Namespace) -> None:
    with database(args.database) as url, tempfile.TemporaryDirectory(prefix="sift-bench-cycle-") as tmp:
        (Path(tmp) / "metrics").mkdir()
        env = harness.service_env(
            url,
            Path(tmp) / "metrics",
            SIFT_BATCH_TARGETS_PER_JOB=str(max(args.targets, 32)),
            SIFT_BATCH_JOBS_PER_CALLER="1",
        )
        with harness.django_in_process(env):
            caller = harness.migrate_and_issue_caller("bench-cycle")
            where = server_settings() if args.database == "postgresql" else "SQLite, WAL, synchronous=NORMAL"
            print(f"{args.database}: {where}")
            print(f"jobs: {args.history} unmeasured + {args.runs} measured, {args.targets} targets each\n")
            for run in range(args.history):
                drain_one_job(caller, f"history{run}", args.targets)
            print_header()
            measured = []
            for run in range(1, args.runs + 1):
                drained = drain_one_job(caller, f"run{run}", args.targets)
                print_row(str(run), drained)
                measured.append(drained)
            print_summary(measured, args.statements)


def main() -> int:
    args = parse_args()
    return harness.run_until_interrupted(lambda: bench(args))


if __name__ == "__main__":
    sys.exit(main())
