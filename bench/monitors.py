"""Benchmark: many monitors beside a stream of batch jobs, through a real cluster on PostgreSQL.

    .venv/bin/python -m bench.monitors [--monitors 1000] [--callers 100] [--every 300]
                                       [--duration 360] [--fetch-ms 20] [--workers 2]

One command does everything: it recreates the ``sift_bench_monitors`` database, migrates it, and
first counts in this process what one batch target and one monitor run cost the engine (SQL
statements and CPU, with a fetch that returns at once). Then it makes ``--monitors`` monitors of
``--callers`` callers, their first due times spread over one ``--every``, starts ``qcluster``
with ``SIFT_TEST_FETCH_FUNC=bench.monitors.timed_fetch`` (a fetch that takes ``--fetch-ms``),
and, for ``--duration`` seconds, submits one batch job of 32 targets after another for one more
caller (first alone, then beside the monitors). It prints:

- how late each monitor run was: the run's end (``last_run_at``) less the due time it was
  claimed at, over every run in the window (the aim: within a minute);
- each batch job's time from submit to finished, beside the monitors and alone (``--baseline``
  seconds of jobs first, before any monitor exists), and the ideal schedule of the lanes the
  monitors leave: the jobs' time alone times ``workers / (workers - monitor load)``, where the
  monitor load is the runs a second times the fetch (the aim: within 1.2 times).

At the end, also on Ctrl-C or an error, it stops the cluster and drops the database. Nothing is
fetched: the URLs are under ``.invalid``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import harness
from bench.postgres import BenchDatabase, server_settings
from bench.stats import median, percentile

if TYPE_CHECKING:
    from batch.engine.seam import Caller, Result
    from fetch.targets import Target

DATABASE = BenchDatabase("sift_bench_monitors")
TIMED_FETCH = "bench.monitors.timed_fetch"
FETCH_MS_VARIABLE = "BENCH_FETCH_MS"
TARGETS_PER_JOB = 32
COST_ITEMS = 64


def timed_fetch(caller: Caller, target: Target) -> Result:
    """The cluster's fetch: takes ``BENCH_FETCH_MS`` and returns an empty reading."""
    time.sleep(float(os.environ.get(FETCH_MS_VARIABLE, "0")) / 1000)
    return {"content": "", "meta": {}}


def instant_fetch(caller: Caller, target: Target) -> Result:
    return {"content": "", "meta": {}}


# --- what one item costs the engine, in this process -------------------------------------------


def engine_cost() -> dict[str, tuple[float, float]]:
    """Statements and CPU ms per batch target and per monitor run, each drained in this process."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from batch import jobs
    from batch.engine import monitor_runs, worker
    from batch.models import ApiKey, Monitor
    from doors.validation import validate_targets

    caller, _ = ApiKey.issue("bench-cost")
    measured = {}
    # Unmeasured: both paths once, so that neither pays for the first queries' compiling.
    jobs.submit(caller, validate_targets(["https://warm.invalid/"]))
    now = timezone.now()
    Monitor.objects.create(caller=caller, url="https://warm.invalid/", every=3600, created_at=now, due_at=now)
    monitor_runs.NEXT_DUE.looked_at = None
    worker.drain(instant_fetch, budget=60)
    jobs.submit(caller, validate_targets([f"https://t{n}.invalid/" for n in range(32)]))
    measured["batch target"] = _counted(
        connection, CaptureQueriesContext, lambda: worker.drain(instant_fetch, budget=60), 32
    )
    now = timezone.now()
    Monitor.objects.bulk_create(
        Monitor(caller=caller, url=f"https://m{n}.invalid/", every=3600, created_at=now, due_at=now)
        for n in range(COST_ITEMS)
    )
    monitor_runs.NEXT_DUE.looked_at = None
    measured["monitor run"] = _counted(
        connection, CaptureQueriesContext, lambda: worker.drain(instant_fetch, budget=60), COST_ITEMS
    )
    return measured


def _counted(connection: Any, capture: Any, drain: Any, items: int) -> tuple[float, float]:
    started = time.process_time()
    with capture(connection) as queries:
        ran = drain()
    cpu = time.process_time() - started
    assert ran == items, f"drained {ran} of {items}"
    return len(queries.captured_queries) / items, cpu * 1000 / items


# --- monitors beside batch jobs, through the cluster ---------------------------------------------


def make_monitors(n_monitors: int, n_callers: int, every: int) -> None:
    from django.utils import timezone

    from batch.models import ApiKey, Monitor

    start = timezone.now() + timedelta(seconds=5)
    callers = [ApiKey.issue(f"watcher-{n}")[0] for n in range(n_callers)]
    Monitor.objects.bulk_create(
        Monitor(
            caller=callers[n % n_callers],
            url=f"https://m{n}.invalid/",
            every=every,
            created_at=start,
            due_at=start + timedelta(seconds=every * n / n_monitors),
        )
        for n in range(n_monitors)
    )


def lateness_samples(seen: dict[tuple[str, Any], float]) -> None:
    """Each run's end less its claimed due time, once per run: the store moved ``due_at`` to that
    due time plus ``every`` (never late by a whole ``every`` here)."""
    from batch.models import Monitor

    for pk, last_run, due, every in Monitor.objects.exclude(last_run_at=None).values_list(
        "pk", "last_run_at", "due_at", "every"
    ):
        if (pk, last_run) not in seen and due is not None and last_run is not None:
            claimed_due = due - timedelta(seconds=every)
            seen[(pk, last_run)] = (last_run - claimed_due).total_seconds()


def batch_stream(duration: float, seen: dict[tuple[str, Any], float]) -> list[float]:
    """Jobs of 32 targets one after another for ``duration`` s; each one's submit-to-finish seconds."""
    from batch import jobs
    from batch.models import ApiKey
    from doors.validation import validate_targets

    caller = ApiKey.objects.filter(name="batch-agent").first() or ApiKey.issue("batch-agent")[0]
    deadline, times, n = time.monotonic() + duration, [], 0
    while time.monotonic() < deadline:
        n += 1
        targets = validate_targets([f"https://j{n}-{i}.invalid/" for i in range(TARGETS_PER_JOB)])
        started = time.monotonic()
        job = jobs.submit(caller, targets).job
        while True:
            job.refresh_from_db(fields=["status"])
            if job.status not in ("queued", "running"):
                break
            lateness_samples(seen)
            time.sleep(0.2)
        times.append(time.monotonic() - started)
    return times


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--monitors", type=int, default=1000)
    parser.add_argument("--callers", type=int, default=100)
    parser.add_argument("--every", type=int, default=300, help="seconds between a monitor's runs")
    parser.add_argument(
        "--duration", type=float, default=360, help="seconds of batch jobs beside the monitors"
    )
    parser.add_argument("--baseline", type=float, default=90, help="seconds of batch jobs alone, first")
    parser.add_argument("--fetch-ms", type=float, default=20, help="how long each fetch takes")
    parser.add_argument("--workers", type=int, choices=(1, 2), default=2)
    return parser.parse_args()


def bench(args: argparse.Namespace) -> None:
    with DATABASE.fresh(), tempfile.TemporaryDirectory(prefix="sift-bench-monitors-") as tmp:
        workdir = Path(tmp)
        (workdir / "metrics").mkdir()
        env = harness.service_env(
            DATABASE.url,
            workdir / "metrics",
            SIFT_TEST_FETCH_FUNC=TIMED_FETCH,
            SIFT_BATCH_WORKERS=str(args.workers),
            SIFT_BATCH_JOBS_TOTAL="4",
            SIFT_MONITORS_TOTAL=str(args.monitors + COST_ITEMS),
        )
        env[FETCH_MS_VARIABLE] = str(args.fetch_ms)
        with harness.django_in_process(env):
            harness.migrate_and_issue_caller("bench-monitors")
            print(f"PostgreSQL: {server_settings()}")
            print_cost(engine_cost())
            from batch.models import Monitor

            Monitor.objects.all().delete()
            print(
                f"\n{args.monitors} monitors of {args.callers} callers every {args.every}s, fetch "
                f"{args.fetch_ms:g} ms, SIFT_BATCH_WORKERS={args.workers}; {args.baseline:g}s of jobs "
                f"alone, then {args.duration:g}s of jobs beside the monitors"
            )
            seen: dict[tuple[str, Any], float] = {}
            with harness.qcluster(env, workdir / "cluster.log", args.workers):
                alone = batch_stream(args.baseline, {})
                make_monitors(args.monitors, args.callers, args.every)
                times = batch_stream(args.duration, seen)
                lateness_samples(seen)
        print_schedule(args, list(seen.values()), alone, times)


def print_cost(cost: dict[str, tuple[float, float]]) -> None:
    print("\nengine cost per item, in this process (a fetch that returns at once):")
    for label, (statements, cpu_ms) in cost.items():
        print(f"  {label:13} {statements:5.1f} statements  {cpu_ms:6.2f} ms CPU")


def print_schedule(
    args: argparse.Namespace, late: list[float], alone: list[float], times: list[float]
) -> None:
    """The lateness of the runs; the jobs beside the monitors against the jobs alone, scaled to
    the lanes the monitors leave (``workers / (workers - load)``): that is the ideal schedule."""
    runs_per_second = len(late) / args.duration if args.duration else 0.0
    load = runs_per_second * args.fetch_ms / 1000
    print(f"\nmonitor runs: {len(late)} ({runs_per_second:.2f}/s, a load of {load:.2f} lanes)")
    if late:
        print(
            f"  lateness s: median {median(late):.2f}  p99 {percentile(late, 99):.2f}  "
            f"max {max(late):.2f}  over 60 s: {sum(1 for s in late if s > 60)}"
        )
    for label, spans in (("alone", alone), ("beside monitors", times)):
        if spans:
            print(
                f"batch jobs {label}: {len(spans)} of {TARGETS_PER_JOB} targets, seconds median "
                f"{median(spans):.2f}  p90 {percentile(spans, 90):.2f}  max {max(spans):.2f}"
            )
    if alone and times:
        ideal = median(alone) * args.workers / max(args.workers - load, 1e-9)
        print(f"  ideal beside monitors {ideal:.2f}s; median / ideal {median(times) / ideal:.2f} (aim: 1.2)")


def main() -> int:
    args = parse_args()
    return harness.run_until_interrupted(lambda: bench(args))


if __name__ == "__main__":
    sys.exit(main())
