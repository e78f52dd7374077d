"""The service under test, for the benchmarks: its environment, Django in the bench process, the
cluster as a subprocess, stopping subprocesses, and Ctrl-C or SIGTERM unwinding it all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from batch.models import ApiKey

REPO = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
READY_TIMEOUT_SECONDS = 60.0


# --- Ctrl-C and SIGTERM ----------------------------------------------------------------------


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised wherever the bench is, so that it unwinds exactly as Ctrl-C does."""


def raise_terminated(signum: int, frame: object) -> NoReturn:
    raise Terminated


def run_until_interrupted(bench: Callable[[], None]) -> int:
    """Run ``bench``: 0, or 130 after Ctrl-C and 143 after SIGTERM.

    Both unwind through the bench's ``with`` and ``finally`` blocks, so its subprocesses are
    stopped and its database dropped however it ends.
    """
    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        bench()
    except KeyboardInterrupt as interrupt:
        print("interrupted", file=sys.stderr)
        return 143 if isinstance(interrupt, Terminated) else 130
    return 0


# --- subprocesses ----------------------------------------------------------------------------


def service_env(database_url: str, metrics_dir: Path, **settings: str) -> dict[str, str]:
    """The environment of the service under test and of Django in this process: ours, minus any
    operator's SIFT_*, database and metrics settings, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIFT_", "DATABASE_URL", "PROMETHEUS"))}
    env.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="sift_site.settings",
        DEBUG="false",
        # As `make run` does: every process writes its metrics to files (django-prometheus'
        # counters shared across gunicorn workers and the cluster), which is part of the cost.
        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
        PYTHONUNBUFFERED="1",
        **settings,
    )
    return env


def stop(process: subprocess.Popen[Any], grace: float = 30) -> None:
    """Stop a subprocess started in a session of its own; its whole session is killed after ``grace`` s."""
    if process.poll() is not None:
        return
    process.terminate()  # the main process only: qcluster and gunicorn stop their children themselves
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


# --- Django in this process ------------------------------------------------------------------


def setup_django(env: dict[str, str]) -> None:
    os.environ.clear()
    # The cluster logs every target as in production; this process keeps the table readable.
    os.environ.update(env, LOG_LEVEL="WARNING")
    import django

    django.setup()


@contextmanager
def django_in_process(env: dict[str, str]) -> Iterator[None]:
    """Django set up here on ``env``; its connections closed on the way out, before the drop."""
    setup_django(env)
    try:
        yield
    finally:
        from django.db import connections

        connections.close_all()


def migrate_and_issue_caller(name: str) -> ApiKey:
    from django.core.management import call_command

    from batch.models import ApiKey

    call_command("migrate", verbosity=0, interactive=False)
    caller, _ = ApiKey.issue(name)
    return caller


def wait_until_finished(job_id: str, poll: float, timeout: float) -> tuple[str, datetime]:
    """The job's status and ``finished_at`` once it has settled, looked at every ``poll`` s."""
    from batch.models import LIVE_STATUSES, BatchJob

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, finished = BatchJob.objects.filter(pk=job_id).values_list("status", "finished_at").get()
        if status not in LIVE_STATUSES and finished is not None:
            return status, finished
        time.sleep(poll)
    raise RuntimeError(f"job {job_id} not finished after {timeout:.0f}s")


# --- the cluster -----------------------------------------------------------------------------


@contextmanager
def qcluster(
    env: dict[str, str], log_path: Path, workers: int, pidfile: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """``manage.py qcluster``, yielded once all its workers are up, stopped on the way out.

    With ``pidfile``, a cluster an earlier run left on the same database is stopped first: the
    run was killed outright (SIGKILL, a crash), and its cluster would work on the new database too.
    """
    if pidfile is not None:
        stop_stale_cluster(pidfile, env["DATABASE_URL"])
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches us only; we stop the cluster in order
        )
    if pidfile is not None:
        pidfile.write_text(str(process.pid))
    try:
        wait_for_heartbeats(process, log_path, workers)
        yield process
    finally:
        stop(process)
        if pidfile is not None:
            pidfile.unlink(missing_ok=True)


def stop_stale_cluster(pidfile: Path, database_url: str) -> None:
    """Stop the qcluster an earlier run started and could not stop, if it still runs on our database."""
    try:
        pid = int(pidfile.read_text())
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if f"DATABASE_URL={database_url}".encode() in environ and b"qcluster" in cmdline:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)


def wait_for_heartbeats(process: subprocess.Popen[bytes], log_path: Path, workers: int) -> None:
    """Every cluster worker process writes a heartbeat row once it has started (batch/engine/heartbeat.py)."""
    from batch.models import ClusterHeartbeat

    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while ClusterHeartbeat.objects.count() < workers:
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the cluster did not come up:\n{tail}")
        time.sleep(0.1)
