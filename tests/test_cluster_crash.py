"""A crash of the cluster (``manage.py run_cluster``): SIGKILL to one of its processes, mid-target.

Whichever of run_cluster, qcluster's main process or its sentinel dies, nothing of that cluster
may go on: every process of it is gone within seconds, the target in flight is given back, and a
restarted cluster stores it exactly once (docs/workers.md, "Stopping").
"""

from __future__ import annotations

import contextlib
import os
import re
import signal

import pytest

from batch.engine.supervisor import live_processes
from batch.models import BatchJob

from .deployment import Deployment, wait_for
from .factories import scripted_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]

# A worker holding a target takes up to its grace (8 s) to give it back; the rest goes at once.
GONE_DEADLINE = 20.0
# Far longer than the test: a target that came back did so by release, not by an expired lease.
LEASE = "600s"


@pytest.fixture
def deployment(tmp_path, monkeypatch):
    monkeypatch.setenv("SIFT_TEST_FETCH_DIR", str(tmp_path))
    deployment = Deployment(tmp_path, {"SIFT_BATCH_CLAIM_LEASE": LEASE, "SIFT_BATCH_RETRY_WAIT": "1s"})
    yield deployment
    deployment.stop_all()


def _line(run_cluster: int) -> dict[str, int]:
    """The processes of a started cluster by role, once the sentinel has started its children."""

    def roles() -> dict[str, int] | None:
        processes = live_processes()
        main = next((p.pid for p in processes if p.ppid == run_cluster), None)
        sentinel = next((p.pid for p in processes if p.ppid == main), None)
        children = [p.pid for p in processes if p.ppid == sentinel]
        if main is None or sentinel is None or len(children) < 3:  # a worker, pusher, monitor
            return None
        return {"run_cluster": run_cluster, "qcluster": main, "sentinel": sentinel}

    return wait_for(roles, what="the cluster's processes to start")


def _left(sessions: set[int]) -> list[int]:
    return [p.pid for p in live_processes() if p.session in sessions]


def _stored_lines(deployment: Deployment, idx: int) -> int:
    return len(re.findall(rf"target {idx} (done|failed) outcome=", deployment.log("cluster")))


@pytest.mark.parametrize("victim", ["run_cluster", "qcluster", "sentinel"])
def test_a_killed_process_takes_its_cluster_with_it_and_the_target_is_stored_once_after_a_restart(
    deployment, agent, tmp_path, victim
):
    caller, _ = agent
    job = scripted_job(caller, "block=1")
    deployment.start_cluster()
    process = deployment.processes.pop("cluster")
    line = _line(process.pid)
    marker = wait_for(lambda: next(iter(tmp_path.glob("blocked-*")), None), what="the target to block")
    sessions = {line["run_cluster"], line["qcluster"]}
    # Both sessions: run_cluster's (the test gave it one) and the cluster's under it.
    assert {p.session for p in live_processes() if p.pid in line.values()} == sessions
    worker = int(marker.name.split("-")[1])
    assert worker in _left(sessions)

    os.kill(line[victim], signal.SIGKILL)
    try:
        wait_for(lambda: not _left(sessions), GONE_DEADLINE, "every process of the cluster to end")
        status = process.wait(5)
    finally:
        for pid in _left(sessions):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()
    # Killed itself, or exited non-zero so that a process manager starts the line again.
    assert status == (-signal.SIGKILL if victim == "run_cluster" else 1)
    marker.unlink()
    target = job.targets.get()
    assert (target.status, target.attempts, target.lost_leases) == ("pending", 1, 0), "given back"

    deployment.start_cluster()
    again = wait_for(lambda: next(iter(tmp_path.glob("blocked-*")), None), what="the retry to block")
    assert int(again.name.split("-")[1]) != worker
    (tmp_path / "release").touch()
    wait_for(lambda: BatchJob.objects.get(pk=job.pk).status == "done", 60, "the job to finish")
    target.refresh_from_db()
    assert (target.status, target.attempts, target.lost_leases) == ("done", 2, 0)
    assert _stored_lines(deployment, 0) == 1
