"""Benchmark: a 32-target batch through the real cluster beside the same fetches made directly.

    .venv/bin/python -m bench.cluster_batch [--runs 3] [--workers 2] [--trace] [--data DIR]

One command does everything. It serves 32 pages of the article-extraction data set (in the
bench-data directory, ``--data``, by default ``../shared/bench-data`` beside the repository;
decompressed in memory, never copied into the repository) as ``text/html`` from a threaded HTTP
server on 127.0.0.1 in this process, recreates the ``sift_bench_batch`` database on the local
PostgreSQL, migrates it, issues a fleet caller and starts ``manage.py qcluster`` on it with
``SIFT_BATCH_WORKERS=--workers``, ``SIFT_FETCH_ALLOW_CIDRS=127.0.0.0/8`` and the production
fetch (``batch.pipeline_bridge.fetch_target``, no ``SIFT_TEST_FETCH_FUNC``). Then, ``--runs``
times, alternately:

- ``direct``: the 32 URLs through ``fetch.pipeline.fetch`` (cache, gate, guarded download,
  extraction) by ``--workers`` threads taking them in index order, in one process: a child of
  this one (this module with ``--direct-lanes``), started once like the cluster, so that neither
  phase shares its process with the upstream server;
- ``batch``: one 32-target job through ``batch.jobs.submit``, timed from just before the
  submit until a poll of the job (every 20 ms) sees it finished; ``db`` is the job's own
  ``created_at`` -> ``finished_at``, exact.

The document cache is kept out of the way, not switched off: each phase of each run fetches
its own URLs (``/d1/...``, ``/b1/...``; distinct URLs are needed anyway, or the submit would
reuse the previous run's job, docs/api.md) and the cache table is emptied before each phase, so
every lookup misses and every fetch stores its copy, in both phases, as in production. The
upstream counts each phase's requests; a phase it did not serve 32 times stops the bench.

``--trace`` wraps the production FetchFunc in ``traced_fetch_target`` (below), which notes when
each fetch began and ended, and splits each target of the batch into claim, fetch and store.

At the end, also on an error or Ctrl-C, the cluster is stopped and the database dropped. No
traffic leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import data, harness
from bench.cpu import BUSY_MACHINE_CORES, CpuSnapshot, bench_processes, cores_by_group
from bench.harness import LOOPBACK, REPO
from bench.postgres import BenchDatabase, server_settings
from bench.stats import median

if TYPE_CHECKING:
    from batch.engine.worker import Caller, Result
    from fetch.targets import Target

N_TARGETS = 32
DATABASE = BenchDatabase("sift_bench_batch")
PRODUCTION_FETCH = "batch.pipeline_bridge.fetch_target"
MODULE = "bench.cluster_batch"
TRACED_FETCH = f"{MODULE}.traced_fetch_target"
# A cluster left behind by a run that was killed outright (SIGKILL, a crash) is stopped by the next.
CLUSTER_PIDFILE = Path(tempfile.gettempdir()) / "sift-bench-batch.cluster.pid"
AIM_RATIO = 1.1
FINISH_POLL_SECONDS = 0.02
JOB_TIMEOUT_SECONDS = 300.0
DIRECT_ATTEMPTS = 3
# With --trace, a worker's gap between two targets this long is counted as a stall.
STALL_SECONDS = 0.1


# --- the upstream ----------------------------------------------------------------------------


def load_pages(articles: Path, n: int) -> list[bytes]:
    """The first ``n`` pages of the data set by file name (names are hashes: an arbitrary pick)."""
    paths = sorted((articles / "html").glob("*.html.gz"))[:n]
    if len(paths) < n:
        raise RuntimeError(f"{articles / 'html'} holds {len(paths)} pages, {n} are needed")
    return [gzip.decompress(path.read_bytes()) for path in paths]


class Upstream(ThreadingHTTPServer):
    """Serves page ``i`` at ``/<phase>/<i>.html``, after ``delays[i]`` seconds when given, and counts
    the requests of each phase."""

    daemon_threads = True

    def __init__(self, pages: list[bytes], delays: list[float] | None = None) -> None:
        super().__init__((LOOPBACK, 0), ArticleHandler)
        self.pages = pages
        self.delays = delays or [0.0] * len(pages)
        self.served: Counter[str] = Counter()
        self.lock = threading.Lock()

    def urls(self, phase: str) -> list[str]:
        port = self.server_address[1]
        return [f"http://{LOOPBACK}:{port}/{phase}/{i:02d}.html" for i in range(len(self.pages))]


class ArticleHandler(BaseHTTPRequestHandler):
    server: Upstream

    def do_GET(self) -> None:
        phase, _, name = self.path.lstrip("/").partition("/")
        index = name.removesuffix(".html")
        if not index.isdigit() or int(index) >= len(self.server.pages):
            self.send_error(404)
            return
        time.sleep(self.server.delays[int(index)])
        body = self.server.pages[int(index)]
        with self.server.lock:
            self.server.served[phase] += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a line per request would drown the table


@contextmanager
def upstream(pages: list[bytes], delays: list[float] | None = None) -> Iterator[Upstream]:
    server = Upstream(pages, delays)
    threading.Thread(target=server.serve_forever, name="upstream", daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


# --- CPU, from /proc -------------------------------------------------------------------------


def phase_cpu(before: CpuSnapshot, setup: Setup, seconds: float) -> dict[str, float]:
    """Cores used during the phase: this process, the cluster and the direct process (``ours``),
    our PostgreSQL backends (``pg``), the rest of the machine (``other``).

    A process that started during the phase counts from zero; a backend that ended before the
    second snapshot is missed, which is why the direct lanes close theirs only after it.
    """
    after = CpuSnapshot.take()
    groups = {"ours": bench_processes(setup.roots(), after.processes), "pg": DATABASE.backend_pids()}
    return cores_by_group(before, after, groups, seconds)


# --- Django in this process ------------------------------------------------------------------


def bench_env(workers: int, metrics_dir: Path, fetch: str) -> dict[str, str]:
    """The environment of the cluster, of the direct process and of this process."""
    settings = {"SIFT_BATCH_WORKERS": str(workers), "SIFT_FETCH_ALLOW_CIDRS": "127.0.0.0/8"}
    if fetch != PRODUCTION_FETCH:
        settings.update(SIFT_TEST_FETCH_FUNC=fetch, SIFT_BENCH_TRACE=str(metrics_dir.parent / "trace.jsonl"))
    return harness.service_env(DATABASE.url, metrics_dir, **settings)


def empty_document_cache() -> None:
    from fetch.models import CachedDocument

    CachedDocument.objects.all().delete()


# --- the phases ------------------------------------------------------------------------------


@dataclass
class Phase:
    """One phase of one run. Times in seconds; ``spans`` are (start, end) per target, in index order."""

    kind: str
    run: int
    total: float
    spans: list[tuple[float, float]]
    chars: list[int]
    db_total: float | None = None
    wake: float | None = None
    cpu: dict[str, float] = field(default_factory=dict)
    trace: str = ""


class LanesCrashed(Exception):
    pass


class DirectLanes:
    """A child process (``--direct-lanes N``) that fetches each phase's URLs with N threads.

    The lanes get a process of their own, so that the upstream server in this process competes
    with them no more than with the cluster, and so that a crash in a lane (trafilatura is not
    safe in two threads at once, adbar/trafilatura#840) ends one phase, not the bench.
    """

    def __init__(self, env: dict[str, str], log_path: Path, threads: int) -> None:
        self.args = [sys.executable, "-X", "faulthandler", "-m", MODULE, "--direct-lanes", str(threads)]
        self.env = {**env, "LOG_LEVEL": "WARNING"}
        self.log_path = log_path
        self.process = self._start()

    def _start(self) -> subprocess.Popen[str]:
        with self.log_path.open("a") as log:
            self.log_offset = log.tell()
            process = subprocess.Popen(
                self.args,
                cwd=REPO,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                start_new_session=True,
            )
        assert process.stdout is not None
        if process.stdout.readline() != "ready\n":  # Django is set up, the lanes may start
            raise RuntimeError(f"the direct process did not start:\n{self.log_path.read_text()[-3000:]}")
        return process

    def fetch(self, urls: list[str]) -> dict[str, Any]:
        """``total`` and ``results`` for ``urls``: each [began, ended, chars] or an error message."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None
        assert stdout is not None
        with contextlib.suppress(BrokenPipeError):
            stdin.write(json.dumps(urls) + "\n")
            stdin.flush()
        answer = stdout.readline()
        if answer:
            result: dict[str, Any] = json.loads(answer)
            return result
        code = self.process.wait()
        with self.log_path.open() as log:
            log.seek(self.log_offset)
            message = crash_summary(log.read())
        self.process = self._start()
        raise LanesCrashed(f"exit {code}: {message}")

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        harness.stop(self.process)


def crash_summary(stderr: str) -> str:
    """The fatal error's first lines and the innermost frame of the thread that crashed."""
    lines = stderr.splitlines()
    head = [line for line in lines if line and not line.startswith((" ", "Thread", "Current", "Extension"))]
    crashed = next((i for i, line in enumerate(lines) if line.startswith("Current thread")), len(lines))
    frame = next((line.strip() for line in lines[crashed + 1 : crashed + 2]), "")
    return " | ".join([*head[:2], frame])


@contextmanager
def direct_lanes(env: dict[str, str], log_path: Path, threads: int) -> Iterator[DirectLanes]:
    lanes = DirectLanes(env, log_path, threads)
    try:
        yield lanes
    finally:
        lanes.close()


def serve_direct_lanes(threads: int) -> None:
    """``--direct-lanes``: for each JSON list of URLs on stdin, one JSON answer line on stdout."""
    harness.setup_django(dict(os.environ))
    print("ready", flush=True)
    with ThreadPoolExecutor(threads, thread_name_prefix="direct") as pool:
        for line in sys.stdin:
            urls = json.loads(line)
            started = time.perf_counter()
            # Taken in index order by the pool's threads; their connections stay open, as the cluster's do.
            results = list(pool.map(fetch_directly, urls))
            print(json.dumps({"total": time.perf_counter() - started, "results": results}), flush=True)


def fetch_directly(url: str) -> tuple[float, float, int] | str:
    from fetch import cache, pipeline
    from fetch.errors import FetchError
    from fetch.targets import parse_target

    began = time.perf_counter()
    try:
        envelope = pipeline.fetch(parse_target(url), partition=cache.FLEET_PARTITION, caller="bench")
    except FetchError as exc:
        return f"{exc.outcome}: {exc.message}"
    return began, time.perf_counter(), envelope["chars"]


def direct_phase(run: int, urls: list[str], setup: Setup) -> Phase:
    before = CpuSnapshot.take()
    answer = setup.lanes.fetch(urls)
    total, results = answer["total"], answer["results"]
    cpu = phase_cpu(before, setup, total)
    failures = [f"{idx}: {result}" for idx, result in enumerate(results) if isinstance(result, str)]
    if failures:
        raise RuntimeError(f"direct run {run}: {len(failures)} fetches failed: {failures[:3]}")
    spans = [(began, ended) for began, ended, _ in results]
    return Phase("direct", run, total, spans, [chars for _, _, chars in results], cpu=cpu)


def batch_phase(run: int, urls: list[str], setup: Setup) -> Phase:
    from batch import jobs
    from doors.validation import validate_targets

    targets: list[object] = list(urls)
    before = CpuSnapshot.take()
    started, submit_began = time.perf_counter(), time.time()
    job_id = jobs.submit(setup.caller, validate_targets(targets)).job.pk
    submit_returned = time.time()
    harness.wait_until_finished(job_id, FINISH_POLL_SECONDS, JOB_TIMEOUT_SECONDS)
    total = time.perf_counter() - started
    cpu = phase_cpu(before, setup, total)
    return stored_phase(job_id, run, total, cpu, (submit_began, submit_returned))


def stored_phase(
    job_id: str, run: int, total: float, cpu: dict[str, float], submit: tuple[float, float]
) -> Phase:
    """The batch's figures from what the worker wrote: target spans and chars, created -> finished."""
    from batch.models import BatchJob, BatchTarget

    job = BatchJob.objects.get(pk=job_id)
    targets = list(BatchTarget.objects.filter(job_id=job_id).order_by("idx"))
    if job.status != "done":
        failed = [(t.idx, t.outcome, t.error) for t in targets if t.status == "failed"]
        raise RuntimeError(f"batch run {run}: job {job_id} ended {job.status}: {failed[:3]}")
    created = job.created_at.timestamp()
    spans = [(stamp(t.started_at) - created, stamp(t.finished_at) - created) for t in targets]
    return Phase(
        "batch",
        run,
        total,
        spans,
        [(t.result or {})["meta"]["chars"] for t in targets],
        db_total=stamp(job.finished_at) - created,
        wake=min(start for start, _ in spans),
        cpu=cpu,
        trace=trace_summary(targets, created, submit),
    )


def stamp(moment: datetime | None) -> float:
    if moment is None:
        raise RuntimeError("a finished job is missing a timestamp")
    return moment.timestamp()


@dataclass
class Setup:
    server: Upstream
    caller: Any
    cluster_pid: int
    lanes: DirectLanes
    crashes: list[str] = field(default_factory=list)

    def roots(self) -> list[int]:
        return [self.cluster_pid, self.lanes.process.pid]


def run_phase(setup: Setup, kind: str, run: int) -> Phase:
    """One phase. When the direct process crashes, the phase runs again on fresh URLs, up to
    ``DIRECT_ATTEMPTS`` times, after an unmeasured pass that warms the new process up."""
    for attempt in range(1, DIRECT_ATTEMPTS + 1):
        label = f"{kind[0]}{run}" + (f"-{attempt}" if attempt > 1 else "")
        try:
            if attempt > 1:
                setup.lanes.fetch(setup.server.urls(f"w{run}-{attempt}"))
            empty_document_cache()
            urls = setup.server.urls(label)
            phase = batch_phase(run, urls, setup) if kind == "batch" else direct_phase(run, urls, setup)
        except LanesCrashed as crash:
            setup.crashes.append(f"direct run {run} attempt {attempt}: {crash}")
            print(f"{run:<5}{kind:<8}   the direct process crashed ({crash}); running the phase again")
            continue
        served = setup.server.served[label]
        if served != len(urls):
            raise RuntimeError(f"{kind} run {run}: the upstream served {served} of {len(urls)}")
        return phase
    raise RuntimeError(f"the direct process crashed {DIRECT_ATTEMPTS} times in run {run}")


# --- --trace ---------------------------------------------------------------------------------


def traced_fetch_target(caller: Caller, target: Target) -> Result:
    """The production FetchFunc, noting in ``SIFT_BENCH_TRACE`` when the fetch began and ended."""
    from batch.pipeline_bridge import fetch_target

    began = time.time()
    try:
        return fetch_target(caller, target)
    finally:
        line = {"pid": os.getpid(), "url": target.url, "began": began, "ended": time.time()}
        with open(os.environ["SIFT_BENCH_TRACE"], "a") as trace:
            trace.write(json.dumps(line) + "\n")


def trace_summary(targets: list[Any], created: float, submit: tuple[float, float]) -> str:
    """Per target: claim (started_at -> fetch), fetch, store (fetch -> finished_at) and gap
    (finished_at -> the same worker's next started_at: the store, and the next claim's look for
    a target, in one transaction), medians in ms; then the wake-up, per worker in ms after
    created_at: the submit's call began (negative) and returned, drain queued, first claim, first
    fetch. Empty without --trace."""
    path = os.environ.get("SIFT_BENCH_TRACE")
    if not path or not Path(path).exists():
        return ""
    fetches = {line["url"]: line for line in map(json.loads, Path(path).read_text().splitlines())}
    lanes: dict[int, list[tuple[float, float, float, float]]] = {}
    for t in targets:
        fetch = fetches[t.url]
        times = (stamp(t.started_at), fetch["began"], fetch["ended"], stamp(t.finished_at))
        lanes.setdefault(fetch["pid"], []).append(times)
    steps: dict[str, list[float]] = {"claim": [], "fetch": [], "store": [], "gap": []}
    for spans in lanes.values():
        spans.sort()
        for claimed, began, ended, finished in spans:
            steps["claim"].append(began - claimed)
            steps["fetch"].append(ended - began)
            steps["store"].append(finished - ended)
        steps["gap"] += [after[0] - before[3] for before, after in itertools.pairwise(spans)]
    medians = ", ".join(f"{name} {median(v) * 1000:.0f}" for name, v in steps.items() if v)
    stalls = [gap for gap in steps["gap"] if gap >= STALL_SECONDS]
    split = "+".join(str(len(spans)) for spans in lanes.values())
    firsts = sorted(spans[0] for spans in lanes.values())
    wake = ", ".join(
        f"{name} at {'/'.join(f'{(moment - created) * 1000:.0f}' for moment in moments)}"
        for name, moments in (
            ("submit began", [submit[0]]),
            ("returned", [submit[1]]),
            ("drain queued", drains_queued_after(created)[: len(firsts)]),
            ("first claim", [claimed for claimed, _, _, _ in firsts]),
            ("first fetch", [began for _, began, _, _ in firsts]),
        )
    )
    return (
        f"per target, p50 ms: {medians}; gaps over {STALL_SECONDS * 1000:.0f} ms: {len(stalls)}, "
        f"{sum(stalls) * 1000:.0f} ms in all; targets per worker {split}\n{'':<13}wake, ms after "
        f"created_at: {wake}"
    )


def drains_queued_after(created: float) -> list[float]:
    """When drain tasks were queued since ``created``, oldest first: django-q2 notes it in each task."""
    from django_q.models import OrmQ, Task

    from batch.engine.wakeups import DRAIN_TASK

    queued = [task.task["started"] for task in OrmQ.objects.all() if task.func() == DRAIN_TASK]
    queued += Task.objects.filter(func=DRAIN_TASK).values_list("started", flat=True)
    return sorted(moment.timestamp() for moment in queued if moment.timestamp() >= created)


# --- figures ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    total: float
    db: float | None
    wake: float | None
    busy: float
    idle: float
    fetch_p50: float
    fetch_max: float
    ours: float
    pg: float
    other: float


def figures(phase: Phase, workers: int) -> Figures:
    """``busy``: the targets' own time per worker; ``idle``: the rest of the workers' time."""
    durations = [end - start for start, end in phase.spans]
    busy = sum(durations) / workers
    return Figures(
        total=phase.total,
        db=phase.db_total,
        wake=phase.wake,
        busy=busy,
        idle=(phase.db_total if phase.db_total is not None else phase.total) - busy,
        fetch_p50=median(durations),
        fetch_max=max(durations),
        **phase.cpu,
    )


# (attribute, title, scale, decimals)
COLUMNS = (
    ("total", "total s", 1, 2),
    ("db", "db s", 1, 2),
    ("wake", "wake ms", 1000, 0),
    ("busy", "busy s", 1, 2),
    ("idle", "idle s", 1, 2),
    ("fetch_p50", "p50 ms", 1000, 0),
    ("fetch_max", "max ms", 1000, 0),
    ("ours", "cpu us", 1, 2),
    ("pg", "cpu pg", 1, 2),
    ("other", "cpu oth", 1, 2),
)


def print_header() -> None:
    print(f"{'run':<5}{'phase':<8}" + "".join(f"{title:>9}" for _, title, _, _ in COLUMNS))


def print_row(label: str, kind: str, values: dict[str, float | None]) -> None:
    cells = "".join(cell(values[name], scale, decimals) for name, _, scale, decimals in COLUMNS)
    other = values["other"]
    busy = other is not None and other > BUSY_MACHINE_CORES
    print(f"{label:<5}{kind:<8}{cells}" + ("  (busy machine)" if busy else ""))


def cell(value: float | None, scale: int, decimals: int) -> str:
    return f"{'-':>9}" if value is None else f"{value * scale:>9.{decimals}f}"


def median_row(rows: Sequence[Figures]) -> dict[str, float | None]:
    medians: dict[str, float | None] = {}
    for name, _, _, _ in COLUMNS:
        values = [v for v in (getattr(row, name) for row in rows) if v is not None]
        medians[name] = median(values) if values else None
    return medians


def print_summary(phases: list[Phase], workers: int, crashes: list[str]) -> None:
    by_kind = {kind: [figures(p, workers) for p in phases if p.kind == kind] for kind in ("direct", "batch")}
    print()
    for kind, rows in by_kind.items():
        print_row("p50", kind, median_row(rows))
    pairs = list(zip(by_kind["direct"], by_kind["batch"], strict=True))
    ratio, db_ratio = ratios(pairs)
    verdict = "within" if ratio <= AIM_RATIO else "OVER"
    print(
        f"\nratio batch/direct, medians of all runs: {ratio:.2f} submit -> finished, "
        f"{db_ratio:.2f} created_at -> finished_at; {verdict} the {AIM_RATIO} aim"
    )
    quiet = [(d, b) for d, b in pairs if max(d.other, b.other) <= BUSY_MACHINE_CORES]
    for label, subset in (("runs 2 and later", pairs[1:]), ("quiet runs only", quiet)):
        if subset and len(subset) < len(pairs):
            print(f"  {label} ({len(subset)} of {len(pairs)}): {ratios(subset)[0]:.2f} submit -> finished")
    print_warm_up(by_kind)
    print_same_text(phases)
    for crash in crashes:
        print(f"CRASHED, and run again: {crash}")


def ratios(pairs: Sequence[tuple[Figures, Figures]]) -> tuple[float, float]:
    """Median batch time over median direct time, for submit -> finished and for the db times."""
    direct = median(d.total for d, _ in pairs)
    batch = median(b.total for _, b in pairs)
    db = median(b.db for _, b in pairs if b.db is not None)
    return batch / direct, db / direct


def print_warm_up(by_kind: dict[str, list[Figures]]) -> None:
    if len(by_kind["direct"]) < 2:  # a first run and at least one later one
        return
    parts = []
    for kind, rows in by_kind.items():
        later = median(f.total for f in rows[1:])
        parts.append(f"{kind} {rows[0].total:.2f} s vs {later:.2f} s ({rows[0].total - later:+.2f} s)")
    print("warm-up, first run vs median of later runs: " + "; ".join(parts))


def print_same_text(phases: list[Phase]) -> None:
    reference = phases[0].chars
    differing = sorted({i for p in phases for i, n in enumerate(p.chars) if n != reference[i]})
    if differing:
        print(f"WARNING: extracted text lengths differ between phases for targets {differing}")
    else:
        print(f"every phase extracted the same text lengths for all {len(reference)} targets")


def print_setup(pages: list[bytes], workers: int, fetch: str) -> None:
    sizes = sorted(len(page) for page in pages)
    print(f"PostgreSQL: {server_settings()}; CPUs: {os.cpu_count()}")
    print(
        f"upstream: {len(pages)} pages of {data.ARTICLES}, {sum(sizes) / 1e6:.1f} MB, "
        f"{sizes[0] // 1000}-{sizes[-1] // 1000} kB (median {median(sizes) / 1000:.0f} kB)"
    )
    print(
        f"direct: pipeline.fetch, {workers} threads in one process; batch: qcluster, "
        f"SIFT_BATCH_WORKERS={workers}, fetch={fetch}"
    )
    print("cache: own URLs per phase and run, table emptied before each phase: every lookup misses")
    print(
        "total: direct threads started -> joined; batch before submit -> poll sees it finished. "
        "db: created_at -> finished_at.\nwake: created_at -> first target started. busy: the "
        "targets' own time / workers; idle: (db or total) - busy. p50, max: one target.\n"
        "cpu, in cores: us = bench + direct process + cluster, pg = our PostgreSQL backends, oth = the "
        f"rest of the machine (over {BUSY_MACHINE_CORES}: busy machine)\n"
    )


# --- main ------------------------------------------------------------------------------------


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return number


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--runs", type=positive, default=3, help="runs of each phase (default 3)")
    parser.add_argument(
        "--workers",
        type=int,
        choices=(1, 2),
        default=2,
        help="SIFT_BATCH_WORKERS of the cluster and threads of the direct phase (default 2)",
    )
    parser.add_argument("--trace", action="store_true", help="split each batch target into its steps")
    data.add_argument(parser)
    parser.add_argument("--direct-lanes", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.direct_lanes:  # the lanes get their URLs from the bench, not the data set
        args.articles = data.articles(parser, args.data)
    return args


def bench(args: argparse.Namespace) -> None:
    with (
        DATABASE.fresh(),
        tempfile.TemporaryDirectory(prefix="sift-bench-batch-") as tmp,
    ):
        phases, crashes = measure(args, Path(tmp))
    print_summary(phases, args.workers, crashes)


def measure(args: argparse.Namespace, workdir: Path) -> tuple[list[Phase], list[str]]:
    fetch = TRACED_FETCH if args.trace else PRODUCTION_FETCH
    pages = load_pages(args.articles, N_TARGETS)
    env = bench_env(args.workers, workdir / "metrics", fetch)
    (workdir / "metrics").mkdir()
    with harness.django_in_process(env):
        caller = harness.migrate_and_issue_caller("bench-batch")
        print_setup(pages, args.workers, fetch)
        with (
            upstream(pages) as server,
            harness.qcluster(env, workdir / "cluster.log", args.workers, CLUSTER_PIDFILE) as process,
            direct_lanes(env, workdir / "direct.log", args.workers) as lanes,
        ):
            setup = Setup(server, caller, process.pid, lanes)
            return run_alternately(setup, args), setup.crashes


def run_alternately(setup: Setup, args: argparse.Namespace) -> list[Phase]:
    print_header()
    phases = []
    # Alternating, so that whatever else the machine does hits both phases alike.
    for run, kind in itertools.product(range(1, args.runs + 1), ("direct", "batch")):
        phase = run_phase(setup, kind, run)
        print_row(str(run), kind, vars(figures(phase, args.workers)))
        if phase.trace:
            print(f"{'':<13}{phase.trace}")
        phases.append(phase)
    return phases


def main() -> int:
    args = parse_args()
    if args.direct_lanes:
        serve_direct_lanes(args.direct_lanes)
        return 0
    return harness.run_until_interrupted(lambda: bench(args))


if __name__ == "__main__":
    sys.exit(main())
