"""``?wait=`` holds at most a few request threads; the rest answer at once (docs/decisions.md)."""

from __future__ import annotations

import json
import shlex
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from batch import jobs, waits
from batch.models import BatchJob

from .deployment import Deployment, procfile_command, wait_for
from .factories import submit
from .upstream import slow_upstream

URL = "https://example.org/"


def _timed_get(client, path: str, **params) -> tuple[float, dict]:
    started = time.monotonic()
    response = client.get(path, **params)
    assert response.status_code == 200
    return time.monotonic() - started, response.json()


def _procfile_worker_class() -> str:
    args = shlex.split(procfile_command("web"))
    return args[args.index("--worker-class") + 1]


# --- the bound, in one process -------------------------------------------------------------


def test_the_default_wait_bound_is_per_caller_within_the_total_and_no_thread_pool_caps_web(settings):
    per_caller, total = settings.SIFT_BATCH_WAITS_PER_CALLER, settings.SIFT_BATCH_WAITS_TOTAL
    assert per_caller <= total
    # Under uvicorn workers each synchronous request runs in a thread of its own: a held wait
    # never leaves /healthz queued behind a full pool (docs/decisions.md).
    assert _procfile_worker_class() == "uvicorn_worker.UvicornWorker"


def test_a_wait_beyond_the_callers_slots_answers_at_once_with_the_job_cut_short(agent, settings):
    settings.SIFT_BATCH_WAITS_PER_CALLER = 1
    caller, client = agent
    job_id = submit(client)["id"]
    with waits.wait_slot(caller) as granted:
        assert granted
        waited, body = _timed_get(client, f"/v1/batch/{job_id}", wait=30)
    assert waited < 10
    assert (body["id"], body["status"], body["wait_cut_short"]) == (job_id, "queued", True)
    assert [t["url"] for t in body["targets"]] == [URL]


def test_a_wait_beyond_the_total_answers_at_once_even_for_a_caller_holding_none(make_caller, settings):
    settings.SIFT_BATCH_WAITS_TOTAL = 1
    hog, _ = make_caller("hog")
    _, client = make_caller("polite")
    job_id = submit(client)["id"]
    with waits.wait_slot(hog) as granted:
        assert granted
        waited, body = _timed_get(client, f"/v1/batch/{job_id}", wait=30)
    assert waited < 10
    assert body["wait_cut_short"] is True


def test_a_wait_that_got_its_slot_runs_its_course_and_gives_the_slot_back(agent, settings):
    settings.SIFT_BATCH_WAITS_PER_CALLER = 1
    caller, client = agent
    job_id = submit(client)["id"]
    waited, body = _timed_get(client, f"/v1/batch/{job_id}", wait=1)
    assert waited >= 1
    assert (body["status"], body["wait_cut_short"]) == ("queued", False)
    with waits.wait_slot(caller) as granted:
        assert granted


def test_no_wait_or_a_finished_job_is_never_cut_short_even_with_no_slots(agent, settings):
    settings.SIFT_BATCH_WAITS_TOTAL = 0
    _, client = agent
    job_id = submit(client)["id"]
    assert _timed_get(client, f"/v1/batch/{job_id}")[1]["wait_cut_short"] is False
    client.delete(f"/v1/batch/{job_id}")
    body = _timed_get(client, f"/v1/batch/{job_id}", wait=30)[1]
    assert (body["status"], body["wait_cut_short"]) == ("cancelled", False)


def test_a_wait_that_is_cut_short_still_keeps_the_job_alive(agent, settings):
    settings.SIFT_BATCH_WAITS_TOTAL = 0
    _, client = agent
    job_id = submit(client)["id"]
    long_ago = timezone.now() - timedelta(hours=1)
    BatchJob.objects.filter(pk=job_id).update(last_read_at=long_ago)
    body = _timed_get(client, f"/v1/batch/{job_id}", wait=30)[1]
    assert body["wait_cut_short"] is True
    assert BatchJob.objects.get(pk=job_id).last_read_at > long_ago


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_never_take_more_slots_than_the_bound(make_caller, settings):
    settings.SIFT_BATCH_WAITS_PER_CALLER = 3
    settings.SIFT_BATCH_WAITS_TOTAL = 5
    callers = [make_caller(name)[0] for name in ("a", "b")]
    barrier = threading.Barrier(20)
    release = threading.Event()
    tried: list[bool] = []
    granted: list[str] = []

    def take(caller) -> None:
        barrier.wait()
        with waits.wait_slot(caller) as ok:
            if ok:
                granted.append(caller.name)
            tried.append(ok)
            release.wait(10)

    threads = [threading.Thread(target=take, args=(callers[n % 2],)) for n in range(20)]
    for thread in threads:
        thread.start()
    wait_for(lambda: len(tried) == 20, what="every thread to try for a slot")
    taken = sorted(granted)
    release.set()
    for thread in threads:
        thread.join()
    assert len(taken) == 5
    assert max(taken.count("a"), taken.count("b")) == 3
    with waits.wait_slot(callers[0]) as ok:
        assert ok


@pytest.mark.django_db(transaction=True)
def test_a_job_finishing_during_a_wait_ends_the_wait_at_once(agent):
    _, client = agent
    job_id = submit(client)["id"]

    def cancel() -> None:
        jobs.cancel(BatchJob.objects.get(pk=job_id))
        connection.close()

    canceller = threading.Timer(1, cancel)
    canceller.start()
    waited, body = _timed_get(client, f"/v1/batch/{job_id}", wait=30)
    canceller.join()
    assert body["status"] == "cancelled"
    assert waited < 20


# --- the Procfile's own gunicorn -----------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    seconds: float


def _timed(deployment: Deployment, path: str, key: str | None = None) -> Answer:
    started = time.monotonic()
    status, body, _ = deployment.request(path, key, timeout=40)
    return Answer(status, body, time.monotonic() - started)


@pytest.mark.django_db(transaction=True)
def test_twenty_waits_from_one_caller_leave_healthz_and_another_caller_answering_in_two_seconds(
    tmp_path, make_caller
):
    _, waiter = make_caller("waiter")
    _, other = make_caller("other")
    job_id = submit(waiter)["id"]  # no cluster runs: the job stays queued for the whole test
    waiter_key = waiter.raw_key
    other_key = other.raw_key
    deployment = Deployment(tmp_path, {})
    deployment.start_procfile_web()
    answers: list[Answer] = []
    probes: list[Answer] = []
    waiting = [
        threading.Thread(
            target=lambda: answers.append(_timed(deployment, f"/v1/batch/{job_id}?wait=30", waiter_key))
        )
        for _ in range(20)
    ]
    try:
        for thread in waiting:
            thread.start()
        # At most 2 waits per caller in each of the 2 processes are held; the rest answer at once.
        wait_for(lambda: len(answers) >= 16, timeout=20, what="the waits over the bound to answer")
        for _ in range(5):
            probes.append(_timed(deployment, "/healthz"))
            probes.append(_timed(deployment, "/v1/batch", other_key))
            time.sleep(0.5)
        in_flight_while_probing = 20 - len(answers)
        for thread in waiting:
            thread.join()
    finally:
        deployment.stop_all()
    assert in_flight_while_probing >= 1
    assert [p.status for p in probes] == [200] * 10
    assert max(p.seconds for p in probes) < 2, [round(p.seconds, 2) for p in probes]
    assert [a.status for a in answers] == [200] * 20
    bodies = [json.loads(a.body) for a in answers]
    assert {(b["id"], b["status"]) for b in bodies} == {(job_id, "queued")}
    cut = [a.seconds for a, b in zip(answers, bodies, strict=True) if b["wait_cut_short"]]
    held = [a.seconds for a, b in zip(answers, bodies, strict=True) if not b["wait_cut_short"]]
    assert 16 <= len(cut) <= 19
    assert max(cut) < 15
    assert min(held) >= 30


@pytest.mark.django_db(transaction=True)
def test_twenty_slow_fetches_from_one_caller_leave_healthz_and_another_caller_answering(
    tmp_path, make_caller
):
    _, fetcher = make_caller("fetcher")
    _, other = make_caller("other")
    fetcher_key = fetcher.raw_key
    other_key = other.raw_key
    deployment = Deployment(tmp_path, {"SIFT_FETCH_ALLOW_CIDRS": "127.0.0.0/8"})
    deployment.start_procfile_web()
    answers: list[Answer] = []
    probes: list[Answer] = []
    with slow_upstream(delay=10) as base:
        path = f"/v1/fetch?url={base}/slow&mode=raw"
        fetching = [
            threading.Thread(target=lambda: answers.append(_timed(deployment, path, fetcher_key)))
            for _ in range(20)
        ]
        try:
            for thread in fetching:
                thread.start()
            time.sleep(1)  # every fetch has reached gunicorn
            for _ in range(4):
                probes.append(_timed(deployment, "/healthz"))
                probes.append(_timed(deployment, "/v1/batch", other_key))
                time.sleep(0.5)
            in_flight_while_probing = 20 - len(answers)
            for thread in fetching:
                thread.join()
        finally:
            deployment.stop_all()
    assert in_flight_while_probing >= 1
    assert [p.status for p in probes] == [200] * 8
    assert max(p.seconds for p in probes) < 2, [round(p.seconds, 2) for p in probes]
    # At most 3 fetches per caller in each of the 2 processes are held; the rest answer busy at once.
    refused = [a for a in answers if a.status == 429]
    served = [a for a in answers if a.status == 200]
    assert len(refused) + len(served) == 20
    assert 14 <= len(refused) <= 19
    assert {json.loads(a.body)["code"] for a in refused} == {"busy"}
    assert max(a.seconds for a in refused) < 5
    assert all(json.loads(a.body)["content"] == "slow but here" for a in served)
