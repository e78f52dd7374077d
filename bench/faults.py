"""Faults: workers killed, the cluster stopped by its group, PostgreSQL restarted, mid-job.

    .venv/bin/python -m bench.faults [--kills 10]

One command does everything: it starts a PostgreSQL server of its own (``initdb`` into a
temporary directory, a free loopback port; the shared server is never touched, since one
fault restarts it), migrates it, issues a caller, and runs three faults, each on a fresh job
and a fresh cluster (``manage.py run_cluster``, ``SIFT_BATCH_WORKERS=2``) with the scripted
test fetch (``tests/fetchers.py``: it sleeps as the URL says; nothing is fetched):

- ``SIGKILL worker``: ``--kills`` times, SIGKILL the worker process that is in the middle of
  a target. Recovery: from a kill to the killed target being claimed again (the claim lease,
  ``SIFT_BATCH_CLAIM_LEASE``, here 5 s).
- ``SIGTERM group``: SIGTERM to the cluster's whole process group while two targets are in
  flight, one of 2 s (stored) and one of 12 s (given back), then start the cluster again
  (claim lease 30 s here, longer than a fetch, as it must be).
  Recovery: the stop, then from the new start to the first claim.
- ``PostgreSQL restart``: ``pg_ctl restart -m fast`` under web and cluster while targets run.
  Recovery: from the restart to ``/healthz`` answering ``db: ok``, and to the next target
  stored.

For each: ``lost`` counts targets that never ended (``worker_lost`` is an end), ``twice``
counts targets whose end the cluster's log shows more than once; both must be 0. ``w_lost``
counts targets that ended ``worker_lost`` (killed three times). Figures go
to docs/reliability.md. At the end, also on Ctrl-C or an error, it stops everything and
deletes the server.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from bench import harness, stats
from tests.private_postgres import postgres_bin, private_postgres

if TYPE_CHECKING:
    from batch.models import ApiKey, BatchJob
    from tests.deployment import Deployment

LEASE_SECONDS = 5
# The stop fault's long target (12 s) must fit in its lease, as every fetch must in production.
STOP_LEASE_SECONDS = 30
FAULTS = ("kill", "stop", "restart")
JOB_TIMEOUT = 180.0
T = TypeVar("T")


@dataclass(frozen=True)
class Row:
    fault: str
    targets: int
    lost: int
    twice: int
    worker_lost: int
    recovery: str


# --- the database under the bench, which goes away in one fault ------------------------------


def patiently(query: Callable[[], T], timeout: float = 60) -> T:
    """Run a query of the bench's own, reconnecting while the database restarts."""
    from django.db import DatabaseError, connection

    deadline = time.monotonic() + timeout
    while True:
        try:
            return query()
        except DatabaseError:
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def submit(caller: ApiKey, name: str, queries: list[str]) -> BatchJob:
    from batch import jobs
    from doors.validation import validate_targets

    urls: list[object] = [f"https://{name}.faults.invalid/{i}?{q}" for i, q in enumerate(queries)]
    return jobs.submit(caller, validate_targets(urls)).job


def settle(job: BatchJob) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT
    while patiently(lambda: type(job).objects.get(pk=job.pk).is_live):
        if time.monotonic() > deadline:
            raise RuntimeError(f"job {job.pk} still live after {JOB_TIMEOUT:.0f}s")
        time.sleep(0.2)


def ledger(job: BatchJob, deployment: Deployment) -> tuple[int, int, int]:
    """(targets that never ended, targets whose end was logged more than once, worker_lost ends)."""
    from batch.models import BatchTarget

    targets = BatchTarget.objects.filter(job=job)
    ended = patiently(lambda: targets.filter(status__in=("done", "failed")).count())
    worker_lost = patiently(lambda: targets.filter(outcome="worker_lost").count())
    logged = Counter(
        re.findall(rf"job {job.pk} target (\d+) (?:done|failed) outcome=", deployment.log("cluster"))
    )
    return job.targets_total - ended, sum(1 for n in logged.values() if n > 1), worker_lost


# --- calls.log of the scripted fetch: who is fetching what, and since when --------------------


def in_flight(tmp: Path, after: float) -> list[tuple[int, str, float]]:
    """(pid, url, start) of fetches started after ``after`` that have not ended."""
    from tests import fetchers

    open_calls: dict[tuple[int, str], float] = {}
    for event, at, pid, url in fetchers.read_calls(tmp):
        if event == "start":
            open_calls[(pid, url)] = at
        else:
            open_calls.pop((pid, url), None)
    return [(pid, url, at) for (pid, url), at in open_calls.items() if at > after]


def next_start(tmp: Path, url: str, after: float) -> float | None:
    from tests import fetchers

    return next(
        (at for event, at, _, u in fetchers.read_calls(tmp) if event == "start" and u == url and at > after),
        None,
    )


def wait(condition: Callable[[], T | None], timeout: float = 60) -> T:
    from tests.deployment import wait_for

    result: T = wait_for(condition, timeout)
    return result


# --- the faults ------------------------------------------------------------------------------


def kill_workers(caller: ApiKey, deployment: Deployment, tmp: Path, kills: int) -> Row:
    job = submit(caller, "kill", [f"sleep=1&i={i}" for i in range(3 * kills)])
    deployment.start_cluster()
    killed: list[tuple[str, float]] = []
    for _ in range(kills):
        since = killed[-1][1] if killed else 0.0

        def started(since: float = since) -> tuple[int, str, float] | None:
            return next(iter(in_flight(tmp, since)), None)

        pid, url, _ = wait(started)
        time.sleep(0.3)  # mid-target
        os.kill(pid, signal.SIGKILL)
        killed.append((url, time.time()))
    settle(job)
    job.refresh_from_db()
    # A target killed three times ends worker_lost and has no next start.
    starts = [(next_start(tmp, url, at), at) for url, at in killed]
    waits = [start - at for start, at in starts if start is not None]
    lost, twice, worker_lost = ledger(job, deployment)
    deployment.stop("cluster")
    recovery = f"killed target claimed again after median {stats.median(waits):.1f} s, max {max(waits):.1f} s"
    return Row(f"SIGKILL worker x{kills}", job.targets_total, lost, twice, worker_lost, recovery)


def stop_group(caller: ApiKey, deployment: Deployment, tmp: Path) -> Row:
    from batch.engine.supervisor import session_processes
    from batch.models import BatchTarget

    job = submit(caller, "stop", ["sleep=12", "sleep=2", *[f"sleep=0.5&i={i}" for i in range(6)]])
    deployment.start_cluster()
    process = deployment.processes.pop("cluster")
    wait(lambda: len(in_flight(tmp, 0)) == 2)
    began = time.monotonic()
    os.killpg(process.pid, signal.SIGTERM)
    wait(lambda: process.poll() is not None and not session_processes(process.pid) and not _qcluster_left())
    stopped = time.monotonic() - began
    released = BatchTarget.objects.filter(job=job, status="pending", attempts=1, lost_leases=0).count()
    stored = BatchTarget.objects.filter(job=job, status="done").count()
    restarted = time.time()
    deployment.start_cluster()
    resumed = wait(lambda: next((at for _, _, at in in_flight(tmp, restarted)), None)) - restarted
    settle(job)
    job.refresh_from_db()
    lost, twice, worker_lost = ledger(job, deployment)
    deployment.stop("cluster")
    recovery = (
        f"stopped in {stopped:.1f} s ({stored} stored, {released} released); "
        f"resumed {resumed:.1f} s after start"
    )
    return Row("SIGTERM group", job.targets_total, lost, twice, worker_lost, recovery)


def _qcluster_left() -> bool:
    from batch.engine.supervisor import live_processes

    mine = os.getpid()
    return any(
        p.ppid == mine and b"qcluster" in Path(f"/proc/{p.pid}/cmdline").read_bytes()
        for p in live_processes()
    )


def restart_database(caller: ApiKey, deployment: Deployment, tmp: Path, restart: Callable[[], None]) -> Row:
    from batch.models import BatchTarget

    deployment.start_web()
    job = submit(caller, "restart", [f"sleep=0.3&i={i}" for i in range(30)])
    deployment.start_cluster()
    wait(lambda: BatchTarget.objects.filter(job=job, status="done").count() >= 6)
    began = time.time()
    restart()
    healthy = wait(lambda: _db_ok(deployment) and time.time()) - began
    stored = (
        wait(
            lambda: (
                patiently(lambda: BatchTarget.objects.filter(job=job, finished_at__gt=_aware(began)).exists())
                and time.time()
            )
        )
        - began
    )
    settle(job)
    job.refresh_from_db()
    lost, twice, worker_lost = ledger(job, deployment)
    deployment.stop_all()
    recovery = (
        f"/healthz db ok {healthy:.1f} s after the restart began; next target stored after {stored:.1f} s"
    )
    return Row("PostgreSQL restart", job.targets_total, lost, twice, worker_lost, recovery)


def _db_ok(deployment: Deployment) -> bool:
    try:
        status, body, _ = deployment.request("/healthz", timeout=2)
    except OSError:
        return False
    return status == 200 and json.loads(body)["db"] == "ok"


def _aware(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


# --- the run ---------------------------------------------------------------------------------


def bench(args: argparse.Namespace) -> None:
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise SystemExit("faults.py needs PostgreSQL's server binaries (initdb, pg_ctl)")
    with private_postgres(bin_dir) as server, tempfile.TemporaryDirectory(prefix="sift-faults-") as tmp_dir:
        server.create_database("sift_faults")
        tmp = Path(tmp_dir)
        env = harness.service_env(
            server.url("sift_faults"),
            tmp / "metrics",
            SECRET_KEY=secrets.token_urlsafe(50),
            SIFT_BATCH_WORKERS="2",
            SIFT_BATCH_CLAIM_LEASE=f"{LEASE_SECONDS}s",
            SIFT_BATCH_JOBS_PER_CALLER="10",
        )
        with harness.django_in_process(env):
            from tests.deployment import Deployment

            caller = harness.migrate_and_issue_caller("faults")
            settings = {
                "SIFT_BATCH_WORKERS": "2",
                "SIFT_BATCH_CLAIM_LEASE": f"{LEASE_SECONDS}s",
                "SECRET_KEY": env["SECRET_KEY"],
                "LOG_LEVEL": "INFO",
            }
            rows = []
            faults: dict[str, Callable[[Deployment, Path], Row]] = {
                "kill": lambda d, t: kill_workers(caller, d, t, args.kills),
                "stop": lambda d, t: stop_group(caller, d, t),
                "restart": lambda d, t: restart_database(caller, d, t, server.restart),
            }
            for name in args.only or FAULTS:
                fault = faults[name]
                workdir = tmp / name
                workdir.mkdir()
                lease = STOP_LEASE_SECONDS if name == "stop" else LEASE_SECONDS
                env_here = {
                    **settings,
                    "SIFT_BATCH_CLAIM_LEASE": f"{lease}s",
                    "SIFT_TEST_FETCH_DIR": str(workdir),
                }
                deployment = Deployment(workdir, env_here)
                try:
                    rows.append(fault(deployment, workdir))
                finally:
                    deployment.stop_all()
                    if args.logs:
                        (args.logs / name).mkdir(parents=True, exist_ok=True)
                        for log in workdir.glob("*.log"):
                            shutil.copy(log, args.logs / name / log.name)
    print_table(rows)


def print_table(rows: list[Row]) -> None:
    print(f"{'fault':<20} {'targets':>7} {'lost':>5} {'twice':>5} {'w_lost':>6}  recovery")
    for row in rows:
        counts = f"{row.targets:>7} {row.lost:>5} {row.twice:>5} {row.worker_lost:>6}"
        print(f"{row.fault:<20} {counts}  {row.recovery}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--only", choices=FAULTS, action="append", help="run only this fault (repeatable)")
    parser.add_argument("--logs", type=Path, help="copy the web and cluster logs of each fault here")
    args = parser.parse_args()
    return harness.run_until_interrupted(lambda: bench(args))


if __name__ == "__main__":
    sys.exit(main())
