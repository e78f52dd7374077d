"""The event stream bounds hold for the whole deployment: two web servers (each the Procfile's web
line, two uvicorn worker processes) on one database, real HTTP (docs/api.md, "Events";
``doors/stream_bounds.py``). The bounds' own rules, in process: tests/test_api_events.py."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from batch.models import ApiKey, BatchJob, EventStream

from .deployment import Deployment, wait_for
from .factories import MakeCaller, make_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]

PER_CALLER = 8  # the default
TOTAL = 12
LEASE = 6  # seconds: renewed every 2 s by a live process
ENV = {
    "SIFT_BATCH_STREAMS_TOTAL": str(TOTAL),
    "SIFT_BATCH_STREAM_LEASE": f"{LEASE}s",
    "SIFT_BATCH_STREAM_KEEPALIVE": "1s",
}


def start_web(tmp: Path) -> Deployment:
    deployment = Deployment(tmp, ENV)
    deployment.start_procfile_web()
    return deployment


@pytest.fixture(scope="module")
def webs(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[list[Deployment]]:
    """Two web servers on the test database, shared by the module."""
    deployments: list[Deployment] = []
    try:
        with django_db_blocker.unblock():
            for n in range(2):
                deployments.append(start_web(tmp_path_factory.mktemp(f"web{n}")))
        yield deployments
    finally:
        for deployment in deployments:
            deployment.stop_all()


@pytest.fixture(autouse=True)
def no_stream_left(webs: list[Deployment]) -> Iterator[None]:
    """Every stream a test opened is closed, and its row gone, before the tables are emptied."""
    yield
    live = EventStream.objects.filter(lease_until__gt=timezone.now())
    wait_for(lambda: not live.exists(), what="every stream's row to go")


@dataclass
class Stream:
    connection: http.client.HTTPConnection
    response: http.client.HTTPResponse

    def close(self) -> None:
        self.connection.close()


Refusal = tuple[int, dict[str, Any], http.client.HTTPMessage]


def open_stream(web: Deployment, key: str, job_id: str) -> Stream | Refusal:
    connection = http.client.HTTPConnection("127.0.0.1", web.port, timeout=30)
    connection.request("GET", f"/v1/batch/{job_id}/events", headers={"Authorization": f"Bearer {key}"})
    response = connection.getresponse()
    if response.status == 200:
        assert response.readline() == b": sift job events\n"
        return Stream(connection, response)
    body = json.loads(response.read())
    connection.close()
    return response.status, body, response.headers


def opened(web: Deployment, key: str, job_id: str) -> Stream:
    stream = open_stream(web, key, job_id)
    assert isinstance(stream, Stream), stream
    return stream


def assert_busy(answer: Stream | Refusal) -> None:
    assert not isinstance(answer, Stream), "one stream more than the bounds allow was opened"
    status, body, headers = answer
    assert (status, body["code"]) == (429, "busy")
    assert int(headers["Retry-After"]) == body["retry_after"] >= 1


def waiting_job(caller: ApiKey) -> BatchJob:
    """A job cancelled with a target in flight, as far as its rows say: its streams wait."""
    lease = timezone.now() + timedelta(hours=1)
    return make_job(caller, "cancelled", targets=[{"status": "running", "lease_until": lease}])


@pytest.fixture
def streams() -> Iterator[list[Stream]]:
    """The streams a test opens, closed at its end."""
    held: list[Stream] = []
    yield held
    for stream in held:
        stream.close()


def test_a_callers_streams_are_bounded_across_web_processes(webs, make_caller: MakeCaller, streams):
    caller, client = make_caller("agent")
    job = waiting_job(caller)
    key = client.raw_key
    streams += [opened(webs[n % 2], key, job.id) for n in range(PER_CALLER)]  # four on each server
    assert EventStream.objects.filter(caller=caller).count() == PER_CALLER
    for web in webs:
        assert_busy(open_stream(web, key, job.id))
    stranger, stranger_client = make_caller("stranger")  # other callers are not refused
    streams.append(opened(webs[1], stranger_client.raw_key, waiting_job(stranger).id))
    # Closing one stream admits another, on either server.
    streams.pop(0).close()
    streams.append(wait_for(lambda: _opens(webs[1], key, job.id), what="the closed stream's row to go"))
    assert_busy(open_stream(webs[0], key, job.id))


def _opens(web: Deployment, key: str, job_id: str) -> Stream | None:
    answer = open_stream(web, key, job_id)
    return answer if isinstance(answer, Stream) else None


def test_the_total_is_bounded_across_web_processes_for_a_caller_holding_none(
    webs, make_caller: MakeCaller, streams
):
    keys_and_jobs = []
    for name in ("first", "second", "third"):
        caller, client = make_caller(name)
        keys_and_jobs.append((client.raw_key, waiting_job(caller).id))
    for n in range(TOTAL):  # six each for the first two callers, three on each server
        key, job_id = keys_and_jobs[n % 2]
        streams.append(opened(webs[n // 2 % 2], key, job_id))
    third_key, third_job = keys_and_jobs[2]
    for web in webs:
        assert_busy(open_stream(web, third_key, third_job))
    streams.pop().close()
    streams.append(wait_for(lambda: _opens(webs[0], third_key, third_job), what="a place in the total"))
    assert_busy(open_stream(webs[1], keys_and_jobs[0][0], keys_and_jobs[0][1]))


def test_the_streams_of_a_web_process_that_died_stop_counting_after_their_lease(
    webs, make_caller: MakeCaller, streams, tmp_path
):
    caller, client = make_caller("agent")
    job = waiting_job(caller)
    key = client.raw_key
    doomed = start_web(tmp_path)
    try:
        streams += [opened(doomed, key, job.id) for _ in range(PER_CALLER // 2)]
        streams += [opened(webs[0], key, job.id) for _ in range(PER_CALLER // 2)]
        doomed.kill("web")  # SIGKILL, its workers too: nothing deletes their rows
        killed_at = time.monotonic()
        assert_busy(open_stream(webs[0], key, job.id))
        streams.append(wait_for(lambda: _opens(webs[0], key, job.id), timeout=4 * LEASE, what="the lease"))
        assert time.monotonic() - killed_at >= LEASE / 3  # the dead rows counted until their lease ran out
    finally:
        doomed.stop_all()
    # The live server renewed its streams' leases all along: they still count.
    time.sleep(LEASE / 2)
    streams += [opened(webs[1], key, job.id) for _ in range(PER_CALLER // 2 - 1)]
    assert_busy(open_stream(webs[1], key, job.id))
    assert EventStream.objects.filter(caller=caller).count() == PER_CALLER
