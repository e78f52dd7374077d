"""Benchmark: the per-target cost of the batch scheduler, through a real cluster on PostgreSQL.

    .venv/bin/python -m bench.scheduling [--targets 32] [--runs 5] [--workers 1|2]

One command does everything: it recreates the ``sift_bench_sched`` database on the local
PostgreSQL, migrates it, issues a caller, starts ``manage.py qcluster`` on it with
``SIFT_TEST_FETCH_FUNC=bench.noop.noop`` (a fetch that returns an empty result at once), then
submits ``--runs`` jobs of ``--targets`` targets one after another through
``batch.jobs.submit``, each after the previous one finished, so every job starts on an idle
cluster as an agent's would. An unmeasured warm-up job goes first. At the end, also on Ctrl-C
or an error, it stops the cluster and drops the database. Under the table it prints the CPU the
benchmark and everything else on the machine used, and warns when other work competed.

Every figure comes from the timestamps the worker writes (``started_at`` is taken as a claim
begins, ``finished_at`` as its store begins) and the bench's clock around ``submit``; the same
host's clock throughout. Per target, in the order one worker ran them:

- ``held``: ``finished_at - started_at``: the rest of the claim's transaction and its commit,
  the no-op fetch and the cleaning of its result;
- ``gap``: the previous target's ``finished_at`` to this one's ``started_at``: the previous
  store's transaction (result, counters, settling, the slot freed) and its commit, the eviction
  check, the drain loop's turn and the next claim's first statements;
- ``cycle``: ``started_at`` to the next ``started_at`` on the same worker (held + gap): the
  per-target overhead, to compare with the 15 ms aim.

Per job: ``submit`` is the ``jobs.submit`` call, ``wake`` runs from the start of that call to
the first ``started_at`` (the cluster picking up the drain task), ``drain`` from the first
``started_at`` to the job's ``finished_at``, and ``total`` = ``wake`` + ``drain``. Under the
table, the CPU the cluster's processes and the database's backends used per measured target
(idle polling between jobs included): on a busy machine it moves far less than the times do.
Nothing is fetched: the target URLs are under ``.invalid`` and the only traffic is to the
database on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bench import harness
from bench.cpu import BUSY_MACHINE_CORES, CpuSnapshot, cores_by_group, descendants
from bench.postgres import BenchDatabase, server_settings
from bench.stats import median, percentile

if TYPE_CHECKING:
    from batch.models import ApiKey

DATABASE = BenchDatabase("sift_bench_sched")
NOOP_FETCH = "bench.noop.noop"
AIM_MS = 15.0
FINISH_POLL_SECONDS = 0.01
JOB_TIMEOUT_SECONDS = 120.0


# --- one job ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    started: datetime
    finished: datetime


@dataclass(frozen=True)
class JobRun:
    submitted: datetime
    submit_seconds: float
    finished: datetime
    spans: list[Span]


def run_job(caller: ApiKey, run: int, n_targets: int) -> JobRun:
    from django.utils import timezone

    from batch import jobs
    from doors.validation import validate_targets

    # Distinct URLs per run, or the submit would reuse the previous run's job (docs/api.md).
    targets: list[object] = [f"https://run{run}.bench.invalid/{i}" for i in range(n_targets)]
    submitted = timezone.now()
    began = time.perf_counter()
    job = jobs.submit(caller, validate_targets(targets)).job
    submit_seconds = time.perf_counter() - began
    status, finished = harness.wait_until_finished(job.pk, FINISH_POLL_SECONDS, JOB_TIMEOUT_SECONDS)
    if status != "done":
        raise RuntimeError(f"job {job.pk} ended {status}, not done: see the cluster's log")
    return JobRun(submitted, submit_seconds, finished, job_spans(job.pk))


def job_spans(job_id: str) -> list[Span]:
    from batch.models import BatchTarget

    spans = []
    rows = BatchTarget.objects.filter(job_id=job_id).values_list(
        "idx", "started_at", "finished_at", "attempts"
    )
    for idx, started, finished, attempts in rows:
        if started is None or finished is None or attempts != 1:
            raise RuntimeError(f"job {job_id} target {idx} was not run exactly once ({attempts} attempts)")
        spans.append(Span(started, finished))
    return sorted(spans, key=lambda span: span.started)


# --- figures ---------------------------------------------------------------------------------


def ms(seconds: float) -> float:
    return seconds * 1000


def worker_chains(spans: list[Span]) -> list[list[Span]]:
    """Split the spans into the sequences one worker ran back to back.

    A worker's next claim starts after its previous store began, so each span joins the chain
    that finished most recently before it started. With one worker there is one chain.
    """
    chains: list[list[Span]] = []
    for span in spans:
        ready = [c for c in chains if c[-1].finished <= span.started]
        if ready:
            max(ready, key=lambda c: c[-1].finished).append(span)
        else:
            chains.append([span])
    return chains


@dataclass(frozen=True)
class Figures:
    submit: float
    wake: float
    drain: float
    total: float
    held_median: float
    held_p90: float
    gap_median: float
    gap_p90: float
    gap_max: float
    cycle_median: float
    total_per_target: float
    split: str


def figures(job: JobRun) -> Figures:
    chains = worker_chains(job.spans)
    held = [ms((s.finished - s.started).total_seconds()) for s in job.spans]
    pairs = [pair for chain in chains for pair in itertools.pairwise(chain)]
    gaps = [ms((b.started - a.finished).total_seconds()) for a, b in pairs]
    cycles = [ms((b.started - a.started).total_seconds()) for a, b in pairs]
    wake = ms((job.spans[0].started - job.submitted).total_seconds())
    total = ms((job.finished - job.submitted).total_seconds())
    return Figures(
        submit=ms(job.submit_seconds),
        wake=wake,
        drain=total - wake,
        total=total,
        held_median=median(held),
        held_p90=percentile(held, 90),
        gap_median=median(gaps),
        gap_p90=percentile(gaps, 90),
        gap_max=max(gaps, default=float("nan")),
        cycle_median=median(cycles),
        total_per_target=total / len(job.spans),
        split="+".join(str(len(c)) for c in chains),
    )


# --- the machine -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CpuUse:
    ours: float
    others: float
    cluster_seconds: float  # CPU seconds of the cluster's processes over the window
    postgres_seconds: float  # and of the PostgreSQL backends on the bench database


class CpuMeter:
    """Cores used by the benchmark and by everything else on the machine over a window.

    Ours: this process, the cluster's process tree and the PostgreSQL backends on the bench
    database, as they are at the end of the window.
    """

    def __init__(self, cluster_pid: int) -> None:
        self.cluster_pid = cluster_pid
        self.start()

    def start(self) -> None:
        self.began = time.monotonic()
        self.before = CpuSnapshot.take()

    def stop(self) -> CpuUse:
        seconds = time.monotonic() - self.began
        after = CpuSnapshot.take()
        cluster = [self.cluster_pid, *descendants(self.cluster_pid, after.processes)]
        groups = {"bench": [os.getpid()], "cluster": cluster, "postgres": DATABASE.backend_pids()}
        cores = cores_by_group(self.before, after, groups, seconds)
        return CpuUse(
            ours=cores["bench"] + cores["cluster"] + cores["postgres"],
            others=max(cores["other"], 0),
            cluster_seconds=cores["cluster"] * seconds,
            postgres_seconds=cores["postgres"] * seconds,
        )


# --- the table -------------------------------------------------------------------------------

COLUMNS = (
    ("submit", "submit"),
    ("wake", "wake"),
    ("drain", "drain"),
    ("total", "total"),
    ("held_median", "held p50"),
    ("held_p90", "held p90"),
    ("gap_median", "gap p50"),
    ("gap_p90", "gap p90"),
    ("gap_max", "gap max"),
    ("cycle_median", "cycle p50"),
    ("total_per_target", "total/N"),
)


def print_header() -> None:
    print(f"{'run':<8}" + "".join(f"{title:>10}" for _, title in COLUMNS) + f"{'split':>9}")


def print_row(label: str, values: dict[str, float], split: str) -> None:
    print(f"{label:<8}" + "".join(f"{values[name]:>10.1f}" for name, _ in COLUMNS) + f"{split:>9}")


def print_summary(measured: list[Figures], n_targets: int, cpu: CpuUse) -> None:
    medians = {name: median(getattr(f, name) for f in measured) for name, _ in COLUMNS}
    print_row("median", medians, "")
    per_target = medians["cycle_median"]
    verdict = "within" if per_target <= AIM_MS else "OVER"
    print()
    print(f"per-target overhead (median cycle): {per_target:.1f} ms, {verdict} the {AIM_MS:.0f} ms aim")
    wake, drain, total = medians["wake"], medians["drain"], medians["total"]
    print(
        f"submit -> finished ({n_targets} targets): {total:.0f} ms, of which cluster wake-up "
        f"{wake:.0f} ms ({wake / total:.0%}) and draining {drain:.0f} ms"
    )
    print(
        f"CPU over the measured jobs: bench + cluster + PostgreSQL {cpu.ours:.2f} cores, "
        f"other work {cpu.others:.2f} cores (of {os.cpu_count()})"
    )
    n_targets_measured = n_targets * len(measured)
    print(
        f"CPU per target: cluster {ms(cpu.cluster_seconds) / n_targets_measured:.1f} ms, "
        f"PostgreSQL {ms(cpu.postgres_seconds) / n_targets_measured:.1f} ms "
        "(with the cluster's idle polling between jobs; moves less with other load than the times)"
    )
    if cpu.others > BUSY_MACHINE_CORES:
        print("WARNING: other work competed for the CPU; these figures are too high to quote")


# --- main ------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--targets", type=int, default=32, help="targets per job (default 32)")
    parser.add_argument("--runs", type=int, default=5, help="measured jobs (default 5)")
    parser.add_argument("--workers", type=int, choices=(1, 2), default=1, help="SIFT_BATCH_WORKERS")
    parser.add_argument("--pause", type=float, default=0.5, help="idle seconds between jobs")
    return parser.parse_args()


def bench(args: argparse.Namespace) -> None:
    with (
        DATABASE.fresh(),
        tempfile.TemporaryDirectory(prefix="sift-bench-sched-") as tmp,
    ):
        workdir = Path(tmp)
        env = harness.service_env(
            DATABASE.url,
            workdir / "metrics",
            SIFT_TEST_FETCH_FUNC=NOOP_FETCH,
            SIFT_BATCH_WORKERS=str(args.workers),
            SIFT_BATCH_TARGETS_PER_JOB=str(max(args.targets, 32)),
        )
        (workdir / "metrics").mkdir()
        with harness.django_in_process(env):
            caller = harness.migrate_and_issue_caller("bench-scheduling")
            print(f"PostgreSQL: {server_settings()}")
            print(f"cluster: qcluster, SIFT_BATCH_WORKERS={args.workers}, SIFT_TEST_FETCH_FUNC={NOOP_FETCH}")
            print(f"jobs: {args.runs} measured + 1 warm-up, {args.targets} targets each; times in ms\n")
            with harness.qcluster(env, workdir / "cluster.log", args.workers) as process:
                measured, cpu_use = run_jobs(caller, CpuMeter(process.pid), args)
        print_summary(measured, args.targets, cpu_use)


def run_jobs(caller: ApiKey, meter: CpuMeter, args: argparse.Namespace) -> tuple[list[Figures], CpuUse]:
    """The warm-up job and the measured ones, a row each as it ends; the CPU over the measured."""
    print_header()
    measured = []
    for run in range(args.runs + 1):
        result = figures(run_job(caller, run, args.targets))
        print_row("warm-up" if run == 0 else str(run), vars(result), result.split)
        if run:
            measured.append(result)
        else:
            meter.start()  # the warm-up is not measured
        time.sleep(args.pause)
    return measured, meter.stop()


def main() -> int:
    args = parse_args()
    return harness.run_until_interrupted(lambda: bench(args))


if __name__ == "__main__":
    sys.exit(main())
