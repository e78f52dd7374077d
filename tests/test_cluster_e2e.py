"""End to end with a real ``qcluster`` subprocess on the test database (docs/workers.md, docs/metrics.md)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from batch import jobs
from batch.models import BatchJob

from . import fetchers
from .deployment import Deployment, wait_for
from .factories import SCRIPTED_BASE, scripted_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]

BASE = SCRIPTED_BASE


@pytest.fixture
def deploy(tmp_path, monkeypatch, settings):
    """``deploy(**env)`` → a started Deployment; everything is stopped after the test."""
    monkeypatch.setenv("SIFT_TEST_FETCH_DIR", str(tmp_path))
    settings.SIFT_BATCH_JOBS_PER_CALLER = 10
    started: list[Deployment] = []

    def start(cluster: bool = True, **env: str) -> Deployment:
        deployment = Deployment(
            tmp_path,
            {
                "SIFT_BATCH_CLAIM_LEASE": "4s",
                "SIFT_BATCH_DRAIN_SECONDS": "20s",
                "SIFT_BATCH_RETRY_WAIT": "1s",
                **env,
            },
        )
        started.append(deployment)
        if cluster:
            deployment.start_cluster()
        return deployment

    yield start
    for deployment in started:
        deployment.stop_all()


def _finished(job: BatchJob, timeout: float = 60) -> BatchJob:
    def settled() -> BatchJob | None:
        job.refresh_from_db()
        return job if not job.is_live else None

    return wait_for(settled, timeout, f"job {job.id} to finish")


def test_a_job_goes_queued_running_done_and_failures_make_partial_or_failed(deploy, agent):
    caller, _ = agent
    deploy()
    done = scripted_job(caller, "sleep=0.3", "a=1", "b=1")
    assert done.status == "queued"
    wait_for(lambda: BatchJob.objects.get(pk=done.pk).status == "running", what="running")
    partial = scripted_job(caller, "a=2", "fail=timeout")
    failed = scripted_job(caller, "fail=blocked", "fail=unsupported")
    assert (_finished(done).status, done.targets_done, done.targets_failed) == ("done", 3, 0)
    assert (_finished(partial).status, partial.targets_done, partial.targets_failed) == ("partial", 2, 1)
    assert (_finished(failed).status, failed.targets_done, failed.targets_failed) == ("failed", 2, 2)


@pytest.mark.parametrize("clusters", [1, 2])
def test_never_more_than_two_targets_in_flight_even_with_two_clusters(
    deploy, make_caller, tmp_path, clusters
):
    deployment = deploy(SIFT_BATCH_WORKERS="2")
    if clusters == 2:
        deployment.start_cluster("cluster2")
    jobs = [
        scripted_job(make_caller(f"c{i}")[0], *[f"sleep=0.2&j={i}&t={t}" for t in range(8)]) for i in range(3)
    ]
    for job in jobs:
        assert _finished(job, 90).status == "done"
    assert fetchers.max_concurrency(tmp_path) == 2
    assert len({pid for _, _, pid, _ in fetchers.read_calls(tmp_path)}) >= 2


def test_a_small_job_submitted_second_is_not_starved_by_a_big_one(deploy, make_caller, tmp_path):
    deploy()
    big = scripted_job(make_caller("big")[0], *[f"sleep=0.1&big={i}" for i in range(32)])
    small = scripted_job(make_caller("small")[0], "small=1")
    _finished(small)
    starts = [url for event, _, _, url in fetchers.read_calls(tmp_path) if event == "start"]
    assert sum("big=" in url for url in starts[: starts.index(next(u for u in starts if "small" in u))]) <= 2
    jobs.cancel(big)


def test_busy_targets_are_retried_and_give_up_after_retry_for_while_others_finish(deploy, make_caller):
    deploy(SIFT_BATCH_RETRY_FOR="3s")
    flaky = scripted_job(make_caller("flaky")[0], "busy=2")
    stuck = scripted_job(make_caller("stuck")[0], "busy=always")
    fine = scripted_job(make_caller("fine")[0], "a=1", "b=1")
    assert _finished(fine).status == "done"
    assert _finished(flaky).status == "done"
    assert flaky.targets.get().attempts == 3
    assert _finished(stuck).status == "failed"
    assert stuck.targets.get().outcome == "busy"


def _kill_blocked_worker(tmp_path: Path) -> int:
    marker = wait_for(lambda: next(iter(tmp_path.glob("blocked-*")), None), what="a worker to block")
    pid = int(marker.name.split("-")[1])
    marker.unlink()
    os.kill(pid, signal.SIGKILL)
    return pid


def test_a_worker_killed_mid_target_is_retried_and_the_job_gets_one_result_per_target(
    deploy, agent, tmp_path
):
    caller, _ = agent
    deploy()
    job = scripted_job(caller, "a=1", "block=1", "c=1")
    _kill_blocked_worker(tmp_path)
    wait_for(lambda: list(tmp_path.glob("blocked-*")), what="the retry to block again")
    (tmp_path / "release").touch()
    assert _finished(job).status == "done"
    target = job.targets.get(idx=1)
    assert (target.attempts, target.lost_leases) == (2, 1)
    assert job.targets_done == 3
    assert list(job.targets.values_list("status", flat=True)) == ["done"] * 3


def test_three_kills_on_one_target_fail_it_worker_lost(deploy, agent, tmp_path):
    caller, _ = agent
    deploy()
    job = scripted_job(caller, "block=1", "b=1")
    for _ in range(3):
        _kill_blocked_worker(tmp_path)
    assert _finished(job, 90).status == "partial"
    target = job.targets.get(idx=0)
    assert (target.status, target.outcome, target.attempts) == ("failed", "worker_lost", 3)
    assert job.targets.get(idx=1).status == "done"


def test_cancel_during_an_in_flight_target_stores_it_and_starts_nothing_else(deploy, agent, tmp_path):
    caller, client = agent
    deploy()
    job = scripted_job(caller, "block=1", "b=1", "c=1")
    wait_for(lambda: list(tmp_path.glob("blocked-*")), what="the first target to start")
    assert client.delete(f"/v1/batch/{job.id}").json()["status"] == "cancelled"
    (tmp_path / "release").touch()
    wait_for(lambda: job.targets.get(idx=0).status == "done", what="the in-flight result")
    job.refresh_from_db()
    assert (job.status, job.targets_done) == ("cancelled", 1)
    assert list(job.targets.values_list("status", flat=True)) == ["done", "pending", "pending"]
    assert [url for event, *_, url in fetchers.read_calls(tmp_path) if event == "start"] == [
        f"{BASE}0?block=1"
    ]


def test_queued_jobs_survive_a_restart_of_web_and_cluster(deploy, agent):
    caller, _ = agent
    deployment = deploy(cluster=False)
    deployment.start_web()
    jobs = [scripted_job(caller, f"a={i}", f"b={i}") for i in range(2)]
    deployment.stop_all()
    assert {j.status for j in BatchJob.objects.all()} == {"queued"}
    deployment.start_web()
    deployment.start_cluster()
    for job in jobs:
        assert _finished(job).status == "done"


def test_metrics_show_what_the_worker_processes_did(deploy, agent):
    caller, _ = agent
    deployment = deploy()
    deployment.start_web()
    job = scripted_job(caller, "a=1", "b=1")
    _finished(job)
    text = deployment.get("/metrics").decode()
    samples = dict(line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("sift_"))
    assert float(samples['sift_batch_jobs_total{outcome="done"}']) >= 1
    assert float(samples['sift_batch_targets_total{outcome="ok"}']) >= 2
    assert float(samples["sift_batch_target_seconds_count"]) >= 2
    assert samples["sift_batch_queue_depth"] == "0.0"
    health = json.loads(deployment.get("/healthz"))
    assert health == {"db": "ok", "cluster": "ok"}
