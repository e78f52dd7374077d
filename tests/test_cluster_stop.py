"""Stopping the cluster (``manage.py run_cluster``) by signal, several times in a row, mid-job.

Each stop must leave no process behind within 20 s, and the target in flight is either stored
or given back for an immediate retry that does not count as a lost worker (docs/workers.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path

import pytest

from batch import jobs
from batch.engine.supervisor import live_processes
from batch.models import BatchJob
from doors.validation import validate_targets

from . import fetchers
from .deployment import Deployment, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]

BASE = "https://upstream.test/"
STOP_DEADLINE = 20.0
# Far longer than the test: a target that came back did so by release, not by an expired lease.
LEASE = "600s"


# How the stop is sent: the signal, and to whom.
STOPS = {
    "SIGTERM to the main process": (signal.SIGTERM, "main"),
    "SIGTERM to the whole group": (signal.SIGTERM, "group"),
    "Ctrl-C, SIGINT to the whole group": (signal.SIGINT, "group"),
    # systemd's default KillMode=control-group: every process of the unit, whatever its session.
    "SIGTERM to every process": (signal.SIGTERM, "every"),
}


@pytest.fixture
def deployment(tmp_path, monkeypatch):
    monkeypatch.setenv("SIFT_TEST_FETCH_DIR", str(tmp_path))
    deployment = Deployment(tmp_path, {"SIFT_BATCH_CLAIM_LEASE": LEASE, "SIFT_BATCH_RETRY_WAIT": "1s"})
    yield deployment
    deployment.stop_all()


def _sessions(supervisor_pid: int) -> set[int]:
    """The supervisor's session and the qcluster session under it (it names each of its processes,
    even once qcluster's main process is gone)."""
    return {supervisor_pid} | {p.pid for p in live_processes() if p.ppid == supervisor_pid}


def _cluster_tree(sessions: set[int]) -> list[int]:
    return [p.pid for p in live_processes() if p.session in sessions]


def _stop_and_time(deployment: Deployment, how: str) -> float:
    sig, to_whom = STOPS[how]
    process = deployment.processes.pop("cluster")
    sessions = wait_for(lambda: len(_sessions(process.pid)) == 2 and _sessions(process.pid))
    tree = wait_for(lambda: len(_cluster_tree(sessions)) >= 4 and _cluster_tree(sessions))
    began = time.monotonic()
    if to_whom == "every":
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):  # ended meanwhile, by an earlier signal
                os.kill(pid, sig)
    else:
        (os.killpg if to_whom == "group" else os.kill)(process.pid, sig)
    try:
        wait_for(lambda: process.poll() is not None and not _cluster_tree(sessions), STOP_DEADLINE + 10)
        return time.monotonic() - began
    finally:
        for pid in _cluster_tree(sessions):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()


def _started(tmp_path: Path, url_part: str) -> int:
    return sum(event == "start" and url_part in url for event, *_, url in fetchers.read_calls(tmp_path))


def _stored_lines(tmp_path: Path, idx: int) -> int:
    log = (tmp_path / "cluster.log").read_text(errors="replace")
    return len(re.findall(rf"target {idx} (done|failed) outcome=", log))


@pytest.mark.parametrize("how", list(STOPS))
def test_three_stops_in_a_row_each_end_within_20s_and_the_job_then_completes_once(
    deployment, agent, tmp_path, how
):
    caller, _ = agent
    job = jobs.submit(caller, validate_targets([f"{BASE}0?sleep=2", f"{BASE}1?block=1", f"{BASE}2?c=1"])).job

    # First stop: the target in flight takes 2 s, less than a worker's grace, and is stored.
    deployment.start_cluster()
    wait_for(lambda: _started(tmp_path, "0?sleep") == 1, what="target 0 to start")
    assert _stop_and_time(deployment, how) < STOP_DEADLINE
    first = job.targets.get(idx=0)
    assert (first.status, first.attempts) == ("done", 1)
    assert job.targets.get(idx=1).status == "pending", "no new claim once the stop began"

    # Two more: target 1 blocks past the grace, is given back, and is claimed again next time.
    for stop in (1, 2):
        deployment.start_cluster()
        marker = wait_for(lambda: next(iter(tmp_path.glob("blocked-*")), None), what="target 1 to block")
        assert _stop_and_time(deployment, how) < STOP_DEADLINE
        marker.unlink(missing_ok=True)
        blocked = job.targets.get(idx=1)
        assert (blocked.status, blocked.attempts, blocked.lost_leases) == ("pending", stop, 0)

    (tmp_path / "release").touch()
    deployment.start_cluster()
    wait_for(lambda: BatchJob.objects.get(pk=job.pk).status == "done", 60, "the job to finish")
    job.refresh_from_db()
    assert (job.targets_done, job.targets_failed) == (3, 0)
    assert list(job.targets.values_list("idx", "attempts", "lost_leases")) == [
        (0, 1, 0),
        (1, 3, 0),
        (2, 1, 0),
    ]
    assert [_stored_lines(tmp_path, idx) for idx in range(3)] == [1, 1, 1]
