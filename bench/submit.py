"""Benchmark: ``POST /v1/batch`` beside ``GET /healthz`` on PostgreSQL (or SQLite), through gunicorn.

    .venv/bin/python -m bench.submit [--seconds 10] [--clients 16] [--targets 4] [--warmup 2]
                                     [--database postgres|sqlite]

One command does everything: it recreates the ``sift_bench`` database on the local PostgreSQL
(with ``--database sqlite``: a fresh SQLite file in a temporary directory), migrates it, issues
one API key per client, starts gunicorn on a free loopback port with the Procfile's ``web``
command (same worker class and workers), drives the clients, prints a table and removes the
server and the database again, also on Ctrl-C or an error.

Rows (each a separate phase of the same run, same clients, same server settings):

- ``GET /healthz``: the cheapest database-backed request, the yardstick.
- ``POST /v1/batch (202)``: caps raised so far that every submit stores a new job with
  ``--targets`` distinct targets (URLs under ``.invalid``, never fetched: no cluster runs).
- ``POST /v1/batch (refused)``: default caps (1 live job per caller, 8 in all): after the first
  8 jobs every submit is refused, 429 ``caller_busy`` or 503 ``jobs_busy``; the cost of turning
  a busy agent away.

Each client is its own process with one keep-alive connection, so that neither the GIL nor a
client's own queueing is measured; the CPU each side used is printed under the table.
Traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from bench import harness
from bench.cpu import BUSY_MACHINE_CORES, CpuSnapshot, children, cores_by_group, process_cores
from bench.harness import LOOPBACK, REPO
from bench.postgres import SERVER, BenchDatabase, execute, server_settings
from bench.stats import percentile

BIN = Path(sys.executable).parent
DATABASE = BenchDatabase("sift_bench")
RAISED_CAP = 1_000_000_000


@dataclass(frozen=True)
class Phase:
    label: str
    method: str
    path: str
    expected: frozenset[int]
    meaning: str


HEALTHZ = Phase(
    "GET /healthz", "GET", "/healthz", frozenset({200}), "SELECT 1 and the cluster heartbeat: the yardstick"
)
SUBMIT = Phase(
    "POST /v1/batch (202)",
    "POST",
    "/v1/batch",
    frozenset({202}),
    f"caps raised to {RAISED_CAP}: every submit stores a new job (its targets distinct)",
)
REFUSED = Phase(
    "POST /v1/batch (refused)",
    "POST",
    "/v1/batch",
    frozenset({202, 429, 503}),
    "default caps (1 live job per caller, 8 in all), reached in the warm-up: every submit refused",
)


@dataclass
class ClientResult:
    latencies: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    warmup_statuses: Counter[int] = field(default_factory=Counter)
    transport_errors: int = 0
    connections: int = 0
    last_end: float = 0.0


@dataclass(frozen=True)
class Window:
    start: float
    seconds: float


@dataclass
class Row:
    phase: Phase
    clients: list[ClientResult]
    window: Window
    cpu: CpuUse
    backends: Counter[str]
    stored: str = ""

    @property
    def latencies(self) -> list[float]:
        return [x for c in self.clients for x in c.latencies]

    @property
    def statuses(self) -> Counter[int]:
        return sum((c.statuses for c in self.clients), Counter())

    @property
    def elapsed(self) -> float:
        return max(c.last_end for c in self.clients) - self.window.start

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.elapsed

    @property
    def errors(self) -> int:
        unexpected = sum(n for s, n in self.statuses.items() if s not in self.phase.expected)
        return unexpected + sum(c.transport_errors for c in self.clients)


# --- the database ----------------------------------------------------------------------------

COUNTS = "SELECT (SELECT count(*) FROM batch_batchjob), (SELECT count(*) FROM batch_batchtarget)"


@dataclass(frozen=True)
class SqliteDatabase:
    """A SQLite file of its own, in the run's temporary directory: nothing to recreate or drop."""

    path: Path

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def stored_counts(self) -> tuple[int, int]:
        with sqlite3.connect(self.path) as conn:
            jobs, targets = conn.execute(COUNTS).fetchone()
        return jobs, targets


def stored_counts(sqlite: SqliteDatabase | None) -> tuple[int, int]:
    if sqlite is not None:
        return sqlite.stored_counts()
    (jobs, targets), *_ = execute(COUNTS, database=DATABASE.name)
    return jobs, targets


BACKEND_STATE = f"""
    SELECT CASE
        WHEN wait_event_type = 'Lock' THEN 'waiting for a lock'
        WHEN state = 'idle in transaction' THEN 'in a transaction, waiting for gunicorn'
        WHEN state = 'active' THEN 'running a query or committing'
        ELSE 'idle between transactions' END
    FROM pg_stat_activity WHERE datname = '{DATABASE.name}' AND backend_type = 'client backend'
"""


def sample_backends(seconds: float, every: float = 0.1) -> Counter[str]:
    """What the server's database sessions are doing, sampled: where a submit spends its wait."""
    import psycopg

    states: Counter[str] = Counter()
    until = time.monotonic() + seconds
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        while time.monotonic() < until:
            states.update(state for (state,) in conn.execute(BACKEND_STATE))
            time.sleep(min(every, max(until - time.monotonic(), 0)))
    return states


# --- Django: migrate and keys ----------------------------------------------------------------


def manage(args: list[str], database_url: str) -> str:
    env = {**os.environ, "DATABASE_URL": database_url}
    done = subprocess.run(
        [str(BIN / "python"), "manage.py", *args],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def issue_keys(n: int, database_url: str) -> list[str]:
    code = (
        f"from batch.models import ApiKey\nfor i in range({n}):\n    print(ApiKey.issue(f'bench-{{i}}')[1])\n"
    )
    keys = [line for line in manage(["shell", "-c", code], database_url).split() if line.startswith("sk_")]
    if len(keys) != n:
        raise RuntimeError(f"expected {n} keys, got {len(keys)}")
    return keys


# --- gunicorn --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def procfile_web_command(port: int) -> list[str]:
    """The Procfile's ``web`` line, bound to ``LOOPBACK:port`` whatever the line says."""
    line = next(x for x in (REPO / "Procfile").read_text().splitlines() if x.startswith("web:"))
    argv = shlex.split(re.sub(r"\$\{PORT[^}]*\}|\$PORT", str(port), line.removeprefix("web:")))
    if argv[0] != "gunicorn":
        raise RuntimeError(f"the Procfile's web process is not gunicorn: {line}")
    argv[0] = str(BIN / "gunicorn")
    bind = argv.index("--bind") if "--bind" in argv else argv.index("-b")
    argv[bind + 1] = f"{LOOPBACK}:{port}"
    return argv


def option(argv: list[str], *names: str, default: str) -> str:
    return next((argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in names), default)


def server_env(metrics_dir: Path, database_url: str, *, raised_caps: bool) -> dict[str, str]:
    caps = {"SIFT_BATCH_JOBS_PER_CALLER": str(RAISED_CAP), "SIFT_BATCH_JOBS_TOTAL": str(RAISED_CAP)}
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    return harness.service_env(database_url, metrics_dir, PATH=path, **(caps if raised_caps else {}))


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    def pids(self) -> list[int]:
        return [self.process.pid, *children(self.process.pid)]


@contextmanager
def gunicorn(env: dict[str, str], workdir: Path, name: str, checkout: Path = REPO) -> Iterator[Server]:
    """The Procfile's web process of ``checkout`` (this one by default)."""
    port = free_port()
    argv = procfile_web_command(port)
    log = workdir / f"gunicorn-{name}.log"
    metrics_dir = Path(env["PROMETHEUS_MULTIPROC_DIR"])
    shutil.rmtree(metrics_dir, ignore_errors=True)
    metrics_dir.mkdir(parents=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, cwd=checkout, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Server(process, port, log)
    try:
        wait_until_ready(server, workers=int(option(argv, "--workers", "-w", default="1")))
        yield server
    finally:
        harness.stop(process, grace=20)


def wait_until_ready(server: Server, workers: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"gunicorn exited:\n{server.log.read_text()[-3000:]}")
        if len(children(server.process.pid)) == workers and healthz_ok(server.port):
            return
        time.sleep(0.2)
    raise RuntimeError(f"gunicorn not ready after {timeout}s:\n{server.log.read_text()[-3000:]}")


def healthz_ok(port: int) -> bool:
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=5)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


# --- CPU accounting from /proc ---------------------------------------------------------------


@dataclass(frozen=True)
class CpuUse:
    cores: dict[str, float]
    other_names: list[tuple[str, float]]
    gunicorn_workers: list[float]


def cpu_use(before: CpuSnapshot, after: CpuSnapshot, groups: dict[str, list[int]], seconds: float) -> CpuUse:
    """Cores each group used between the snapshots, the rest as "other", named by its busiest."""

    def used(pid: int) -> float:
        return process_cores(before, after, pid, seconds)

    cores = cores_by_group(before, after, groups, seconds)
    grouped = {pid for pids in groups.values() for pid in pids}
    by_name: dict[str, float] = {}
    for pid, info in after.processes.items():
        if pid not in grouped:
            by_name[info.name] = by_name.get(info.name, 0.0) + used(pid)
    busiest = sorted(((n, c) for n, c in by_name.items() if c >= 0.05), key=lambda x: -x[1])[:3]
    # The first gunicorn pid is the master; a keep-alive connection stays with the worker that
    # accepted it, so an uneven split of the clients shows here.
    return CpuUse(cores, busiest, [used(pid) for pid in groups["gunicorn"][1:]])


# --- the clients -----------------------------------------------------------------------------


def submit_body(client: int, seq: int, n_targets: int) -> bytes:
    # .invalid (RFC 2606) never resolves, so nothing could be fetched even if a cluster ran.
    targets = [f"https://c{client}.bench.invalid/{seq}/{i}" for i in range(n_targets)]
    return json.dumps({"targets": targets}).encode()


def send(
    conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None, key: str
) -> int | None:
    headers = {"Authorization": f"Bearer {key}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
    except (OSError, http.client.HTTPException):
        conn.close()  # http.client opens a new connection on the next request
        return None
    return response.status


@dataclass(frozen=True)
class ClientSpec:
    index: int
    port: int
    phase: Phase
    key: str
    targets: int
    warmup: float
    seconds: float


def run_client(spec: ClientSpec, barrier: Barrier, out: Any) -> None:
    """One agent: back-to-back requests on one keep-alive connection, warm-up then measured."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us
    conn = http.client.HTTPConnection(LOOPBACK, spec.port, timeout=60)
    phase, result, seq, sock = spec.phase, ClientResult(), 0, None
    barrier.wait(timeout=120)
    measure_from = time.monotonic() + spec.warmup
    stop_at = measure_from + spec.seconds
    while (began := time.monotonic()) < stop_at:
        body = submit_body(spec.index, seq, spec.targets) if phase.method == "POST" else None
        seq += 1
        status = send(conn, phase.method, phase.path, body, spec.key)
        ended = time.monotonic()
        if conn.sock is not None and conn.sock is not sock:
            sock, result.connections = conn.sock, result.connections + 1
        if began < measure_from:
            result.warmup_statuses[status or 0] += 1
            continue
        if status is None:
            result.transport_errors += 1
        else:
            result.statuses[status] += 1
        result.latencies.append(ended - began)
        result.ends.append(ended)
        result.last_end = ended
    conn.close()
    out.put(result)


def run_phase(
    phase: Phase, server: Server, keys: list[str], args: argparse.Namespace, sqlite: SqliteDatabase | None
) -> Row:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(len(keys) + 1), ctx.Queue()
    specs = [
        ClientSpec(i, server.port, phase, key, args.targets, args.warmup, args.seconds)
        for i, key in enumerate(keys)
    ]
    clients = [ctx.Process(target=run_client, args=(spec, barrier, out), daemon=True) for spec in specs]
    for client in clients:
        client.start()
    try:
        barrier.wait(timeout=120)
        window = Window(time.monotonic() + args.warmup, args.seconds)
        time.sleep(args.warmup)
        groups = {"clients": [c.pid for c in clients if c.pid], "gunicorn": server.pids()}
        # SQLite runs inside gunicorn: no sessions to sample, no server processes of its own.
        groups["postgres"] = DATABASE.backend_pids() if sqlite is None else []
        before = CpuSnapshot.take()
        if sqlite is None:
            backends = sample_backends(args.seconds)
        else:
            backends = Counter[str]()
            time.sleep(args.seconds)
        cpu = cpu_use(before, CpuSnapshot.take(), groups, args.seconds)
        results = [out.get(timeout=120) for _ in clients]
    finally:
        for client in clients:
            if client.is_alive():
                client.terminate()
            client.join(timeout=10)
    return Row(phase, results, window, cpu, backends)


# --- report ----------------------------------------------------------------------------------


def per_second(row: Row) -> list[int]:
    buckets = Counter(int(end - row.window.start) for c in row.clients for end in c.ends)
    return [buckets[s] for s in range(int(row.window.seconds))]


def statuses_text(statuses: Counter[int]) -> str:
    return " ".join(f"{s}={n}" for s, n in sorted(statuses.items()))


def print_table(rows: list[Row]) -> None:
    header = (
        f"{'endpoint':<26} {'requests':>9} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}  statuses"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        lat = row.latencies
        print(
            f"{row.phase.label:<26} {len(lat):>9} {row.rate:>8.1f} {percentile(lat, 50) * 1000:>8.1f} "
            f"{percentile(lat, 99) * 1000:>8.1f} {row.errors:>7}  {statuses_text(row.statuses)}"
        )


def per_request_text(row: Row) -> str:
    """CPU milliseconds each answered request cost the server and the database.

    Unlike req/s these hardly depend on what else the machine runs, so two runs on a shared
    machine compare by them.
    """
    requests = len(row.latencies) or 1
    gunicorn, postgres = (
        row.cpu.cores[name] * row.window.seconds * 1000 / requests for name in ("gunicorn", "postgres")
    )
    return f"gunicorn {gunicorn:.2f} ms, postgres {postgres:.2f} ms"


def print_details(rows: list[Row]) -> None:
    print(f"\nper row: req/s in each second of the window; CPU in cores (of {os.cpu_count()}) meanwhile")
    for row in rows:
        cores = row.cpu.cores
        cpu = "  ".join(f"{name} {c:.2f}" for name, c in cores.items())
        # The share of its time a client spent on its own CPU work rather than waiting for answers.
        duty = cores["clients"] / len(row.clients)
        print(f"  {row.phase.label}: {row.phase.meaning}")
        print(f"    per second: {' '.join(map(str, per_second(row)))}")
        workers = " + ".join(f"{c:.2f}" for c in row.cpu.gunicorn_workers)
        print(f"    cpu: {cpu}   (gunicorn workers {workers}; each client busy {duty:.0%} of its time)")
        print(f"    cpu per request: {per_request_text(row)}")
        print(f"    connections opened: {sum(c.connections for c in row.clients)}")
        total = sum(row.backends.values()) or 1
        states = ", ".join(f"{n / total:.0%} {state}" for state, n in row.backends.most_common())
        if states:
            print(f"    database sessions: {states}")
        if row.stored:
            print(f"    {row.stored}")
        if cores["other"] > BUSY_MACHINE_CORES:
            busiest = ", ".join(f"{name} {c:.2f}" for name, c in row.cpu.other_names) or "short-lived"
            print(
                f"    WARNING: other processes took {cores['other']:.2f} cores (busiest: {busiest}); too low"
            )


def print_report(rows: list[Row], args: argparse.Namespace) -> None:
    print(f"\n{args.clients} clients, {args.seconds:g} s measured after {args.warmup:g} s warm-up each row\n")
    print_table(rows)
    by_label = {row.phase.label: row for row in rows}
    yardstick = by_label[HEALTHZ.label].rate
    for label in (SUBMIT.label, REFUSED.label):
        if label in by_label:
            print(f"{label} / GET /healthz throughput: {by_label[label].rate / yardstick:.2f}")
    print_details(rows)


# --- the run ---------------------------------------------------------------------------------


def check_stored(row: Row, expected_jobs: int, n_targets: int, sqlite: SqliteDatabase | None) -> None:
    jobs, targets = stored_counts(sqlite)
    ok = jobs == expected_jobs and targets == expected_jobs * n_targets
    verdict = "as expected" if ok else f"EXPECTED {expected_jobs} jobs, {expected_jobs * n_targets} targets"
    row.stored = f"stored after the row: {jobs} jobs, {targets} targets ({verdict})"


def created_jobs(row: Row) -> int:
    return sum(c.statuses[202] + c.warmup_statuses[202] for c in row.clients)


def run(args: argparse.Namespace, workdir: Path, sqlite: SqliteDatabase | None) -> list[Row]:
    database_url = DATABASE.url if sqlite is None else sqlite.url
    if sqlite is None:
        print(f"PostgreSQL: {server_settings('max_connections')}")
    else:
        print(f"SQLite: {sqlite.path.name} in a temporary directory (WAL, synchronous=NORMAL)")
    web = shlex.join(procfile_web_command(0)[1:]).replace(f"{LOOPBACK}:0", f"{LOOPBACK}:<free port>")
    print(f"gunicorn (the Procfile's web line): {web}")
    manage(["migrate", "--no-input"], database_url)
    keys = issue_keys(args.clients, database_url)
    metrics = workdir / "metrics"
    rows = []
    with gunicorn(server_env(metrics, database_url, raised_caps=True), workdir, "raised") as server:
        for phase in (HEALTHZ, SUBMIT):
            print(f"running {phase.label} ...", flush=True)
            rows.append(run_phase(phase, server, keys, args, sqlite))
        check_stored(rows[-1], created_jobs(rows[-1]), args.targets, sqlite)
    # Through the ORM, so whatever now points at jobs or targets goes with them.
    manage(
        ["shell", "-c", "from batch.models import BatchJob; BatchJob.objects.all().delete()"], database_url
    )
    with gunicorn(server_env(metrics, database_url, raised_caps=False), workdir, "default") as server:
        print(f"running {REFUSED.label} ...", flush=True)
        rows.append(run_phase(REFUSED, server, keys, args, sqlite))
        check_stored(rows[-1], created_jobs(rows[-1]), args.targets, sqlite)
    return rows


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10, help="measured seconds per row")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients, one process each")
    parser.add_argument("--targets", type=int, default=4, help="targets per submitted job")
    parser.add_argument("--warmup", type=float, default=2, help="unmeasured seconds before each row")
    parser.add_argument(
        "--database",
        choices=("postgres", "sqlite"),
        default="postgres",
        help="the local PostgreSQL (sift_bench, recreated) or a fresh SQLite file",
    )
    return parser.parse_args()


def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="sift-bench-") as tmp:
        if args.database == "sqlite":
            rows = run(args, Path(tmp), SqliteDatabase(Path(tmp) / "bench.sqlite3"))
        else:
            with DATABASE.fresh():
                rows = run(args, Path(tmp), None)
    print_report(rows, args)


def main() -> int:
    args = parse_args()
    return harness.run_until_interrupted(lambda: bench(args))


if __name__ == "__main__":
    sys.exit(main())
