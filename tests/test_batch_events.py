"""``GET /v1/batch/{id}/events`` end to end: the Procfile's web process, a real cluster, real HTTP
(docs/api.md, "Events")."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from batch.models import ApiKey, BatchJob

from .deployment import Deployment, wait_for
from .factories import SCRIPTED_BASE, MakeCaller, done_target, failed_target, make_job, scripted_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]


@pytest.fixture(scope="module")
def web(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Deployment]:
    """The Procfile's web process, shared by the module."""
    with django_db_blocker.unblock():
        tmp = tmp_path_factory.mktemp("events")
        deployment = Deployment(
            tmp,
            {
                "SIFT_BATCH_WORKERS": "2",
                "SIFT_BATCH_JOBS_PER_CALLER": "10",
                "SIFT_BATCH_STREAM_KEEPALIVE": "1s",
                "SIFT_BATCH_STREAMS_PER_CALLER": "3",
                "SIFT_BATCH_DRAIN_SECONDS": "20s",
            },
        )
    try:
        deployment.start_procfile_web()
        yield deployment
    finally:
        deployment.stop_all()


@pytest.fixture(autouse=True)
def submits_like_the_web_process(settings) -> None:
    """Jobs are submitted in this process: it wakes as many workers as the cluster has."""
    settings.SIFT_BATCH_WORKERS = 2
    settings.SIFT_BATCH_JOBS_PER_CALLER = 10


@pytest.fixture
def fetch_dir(web: Deployment) -> Iterator[Path]:
    """The directory the scripted fetch reads; ``release`` in it lets blocked targets go on."""
    directory = Path(web.env["SIFT_TEST_FETCH_DIR"])
    for left in [directory / "release", *directory.glob("blocked-*")]:
        left.unlink(missing_ok=True)
    yield directory
    (directory / "release").touch()


@pytest.fixture
def cluster(web: Deployment, fetch_dir: Path) -> Iterator[None]:
    """A cluster of two workers for one test, stopped before the tables are emptied (its
    webhook thread polls all the time, and emptying the tables under it can deadlock)."""
    web.start_cluster()
    try:
        yield
    finally:
        (fetch_dir / "release").touch()
        web.stop("cluster")


@dataclass
class Event:
    event: str
    id: int | None
    data: dict[str, Any]


@dataclass
class Stream:
    """One open event stream, read line by line."""

    response: http.client.HTTPResponse
    connection: http.client.HTTPConnection
    comments: list[str] = field(default_factory=list)

    def next_event(self) -> Event:
        fields: dict[str, str] = {}
        while True:
            line = self.response.readline().decode()
            assert line, "the stream ended before the next event"
            line = line.rstrip("\n")
            if line.startswith(":"):
                self.comments.append(line)
            elif line:
                name, _, value = line.partition(": ")
                fields[name] = value
            elif fields:
                event_id = int(fields["id"]) if "id" in fields else None
                return Event(fields["event"], event_id, json.loads(fields["data"]))

    def until_job_event(self) -> list[Event]:
        events = [self.next_event()]
        while events[-1].event != "job":
            events.append(self.next_event())
        assert self.response.read() == b"", "nothing follows the job event"
        return events

    def close(self) -> None:
        self.connection.close()


def open_stream(web: Deployment, key: str, job_id: str, query: str = "", **headers: str) -> Stream:
    connection = http.client.HTTPConnection("127.0.0.1", web.port, timeout=30)
    connection.request(
        "GET", f"/v1/batch/{job_id}/events{query}", headers={"Authorization": f"Bearer {key}", **headers}
    )
    response = connection.getresponse()
    assert response.status == 200, response.read()
    assert response.headers["Content-Type"].startswith("text/event-stream")
    return Stream(response, connection)


def refused_or_stream(web: Deployment, key: str, job_id: str) -> Stream | tuple[int, dict[str, Any], Any]:
    connection = http.client.HTTPConnection("127.0.0.1", web.port, timeout=30)
    connection.request("GET", f"/v1/batch/{job_id}/events", headers={"Authorization": f"Bearer {key}"})
    response = connection.getresponse()
    if response.status == 200:
        return Stream(response, connection)
    body = json.loads(response.read())
    connection.close()
    return response.status, body, response.headers


def refused(web: Deployment, key: str, job_id: str, **headers: str) -> tuple[int, dict[str, Any], Any]:
    connection = http.client.HTTPConnection("127.0.0.1", web.port, timeout=30)
    connection.request(
        "GET", f"/v1/batch/{job_id}/events", headers={"Authorization": f"Bearer {key}", **headers}
    )
    response = connection.getresponse()
    body = json.loads(response.read())
    connection.close()
    return response.status, body, response.headers


def test_events_come_in_the_order_targets_end_each_once_then_the_job(web, agent, fetch_dir, cluster):
    caller, client = agent
    # Two workers: the slow first target ends after the two quick ones the other worker takes.
    job = scripted_job(caller, "sleep=2", "sleep=0.2", "fail=timeout&sleep=0.2")
    stream = open_stream(web, client.raw_key, job.id)
    events = stream.until_job_event()
    targets = [event for event in events if event.event == "target"]
    assert [event.id for event in targets] == [1, 2, 3]
    assert [event.data["seq"] for event in targets] == [1, 2, 3]
    assert [event.data["idx"] for event in targets] == [1, 2, 0]
    assert [event.data["status"] for event in targets] == ["done", "failed", "done"]
    assert targets[0].data["result"]["content"] == f"content of {SCRIPTED_BASE}1?sleep=0.2"
    assert targets[1].data["outcome"] == "timeout"
    assert (events[-1].id, events[-1].data["id"], events[-1].data["status"]) == (None, job.id, "partial")
    assert events[-1].data["targets_done"] == 3
    assert stream.comments, "a quiet stream carries comments"


def test_a_reconnect_with_last_event_id_misses_nothing_and_repeats_nothing(web, agent, fetch_dir, cluster):
    caller, client = agent
    job = scripted_job(caller, "sleep=0.1", "block=1", "sleep=0.1")
    first = open_stream(web, client.raw_key, job.id)
    seen = [first.next_event(), first.next_event()]  # two targets end; the third waits for release
    first.close()
    (fetch_dir / "release").touch()
    wait_for(lambda: not BatchJob.objects.get(pk=job.id).is_live, what="the job to finish")
    again = open_stream(web, client.raw_key, job.id, **{"Last-Event-ID": str(seen[-1].id)})
    rest = again.until_job_event()
    assert [e.id for e in seen] + [e.id for e in rest[:-1]] == [1, 2, 3]
    assert sorted(e.data["idx"] for e in seen + rest[:-1]) == [0, 1, 2]
    assert rest[-1].data["status"] == "done"


def test_a_finished_jobs_stream_answers_everything_at_once_and_content_false_leaves_content_out(web, agent):
    caller, client = agent
    job = make_job(caller, "partial", targets=[done_target(), failed_target()])
    events = open_stream(web, client.raw_key, job.id, "?content=false").until_job_event()
    assert [(e.event, e.id) for e in events] == [("target", 1), ("target", 2), ("job", None)]
    assert "content" not in events[0].data["result"]
    assert events[0].data["result"]["meta"] == done_target()["result"]["meta"]
    assert (events[1].data["status"], events[1].data["outcome"]) == ("failed", "blocked")
    assert events[2].data["status"] == "partial"


def test_cancel_with_a_target_in_flight_sends_its_event_when_stored_then_the_job(
    web, agent, fetch_dir, cluster
):
    caller, client = agent
    job = scripted_job(caller, "block=1", "block=2", "a=3")  # two workers: two in flight, one pending
    wait_for(lambda: len(list(fetch_dir.glob("blocked-*"))) == 2, what="two targets to be in flight")
    stream = open_stream(web, client.raw_key, job.id)
    status, _, _ = _delete(web, client.raw_key, job.id)
    assert status == 200
    time.sleep(1.5)  # the stream keeps waiting for the targets in flight
    (fetch_dir / "release").touch()
    events = stream.until_job_event()
    assert sorted((e.event, e.data["idx"], e.data["status"]) for e in events[:-1]) == [
        ("target", 0, "done"),
        ("target", 1, "done"),
    ]
    assert (events[-1].data["status"], events[-1].data["targets_done"]) == ("cancelled", 2)
    assert stream.comments


def test_a_job_deleted_under_its_stream_ends_it_expired(web, agent, fetch_dir):
    caller, client = agent
    job = _waiting_job(caller)
    stream = open_stream(web, client.raw_key, job.id)
    time.sleep(0.5)
    BatchJob.objects.filter(pk=job.id).delete()  # as the sweep or an eviction does
    events = stream.until_job_event()
    assert [(e.event, e.data) for e in events] == [("job", {"id": job.id, "status": "expired"})]


def _waiting_job(caller: ApiKey) -> BatchJob:
    """A job cancelled with a target in flight, as far as its rows say: its stream waits, and
    the cluster has nothing to do."""
    lease = timezone.now() + timedelta(hours=1)
    return make_job(caller, "cancelled", targets=[{"status": "running", "lease_until": lease}])


def test_another_callers_job_is_not_found_and_a_bad_last_event_id_is_invalid(web, make_caller: MakeCaller):
    owner, _ = make_caller("owner")
    _, stranger = make_caller("stranger")
    job = scripted_job(owner, "a=1")
    status, body, _ = refused(web, stranger.raw_key, job.id)
    assert (status, body["code"]) == (404, "not_found")
    status, body, _ = refused(web, stranger.raw_key, job.id, **{"Last-Event-ID": "x"})
    assert (status, body["code"]) == (400, "invalid_request")
    assert "Last-Event-ID" in body["error"]
    assert refused(web, "sk_unknown", job.id)[0] == 401


def test_streams_beyond_the_callers_share_are_refused_busy_with_retry_after(web, agent, fetch_dir):
    caller, client = agent
    job = scripted_job(caller, "block=1")
    per_caller = 3  # the module's setting, for the deployment: both web workers count together
    opened: list[Stream] = []
    try:
        answer = refused_or_stream(web, client.raw_key, job.id)
        while isinstance(answer, Stream):
            opened.append(answer)
            assert len(opened) <= per_caller
            answer = refused_or_stream(web, client.raw_key, job.id)
        status, body, headers = answer
        assert len(opened) == per_caller
        assert (status, body["code"]) == (429, "busy")
        assert int(headers["Retry-After"]) == body["retry_after"] >= 1
    finally:
        for stream in opened:
            stream.close()
    # Closed streams give their shares back.
    wait_for(lambda: _opens(web, client.raw_key, job.id), what="the shares to be given back")


def _opens(web: Deployment, key: str, job_id: str) -> bool:
    answer = refused_or_stream(web, key, job_id)
    if isinstance(answer, Stream):
        answer.close()
        return True
    return False


def test_a_hundred_open_streams_leave_healthz_and_the_api_answering(web, make_caller: MakeCaller):
    callers = [make_caller(f"watcher{n}") for n in range(34)]
    job_ids = [_waiting_job(caller).id for caller, _ in callers]
    sockets = []
    try:
        for n in range(100):  # three streams per caller, within the caller's share
            _, client = callers[n % len(callers)]
            sockets.append(_raw_stream(web, client.raw_key, job_ids[n % len(callers)]))
        for _ in range(3):
            started = time.monotonic()
            assert web.request("/healthz")[0] == 200
            assert web.request("/v1/batch", callers[0][1].raw_key)[0] == 200
            assert time.monotonic() - started < 5
        assert all(sock.recv(1, socket.MSG_PEEK) for sock in sockets), "every stream is still open"
    finally:
        for sock in sockets:
            sock.close()


def _raw_stream(web: Deployment, key: str, job_id: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", web.port), timeout=30)
    request = (
        f"GET /v1/batch/{job_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\r\n"
    )
    sock.sendall(request.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


def _delete(web: Deployment, key: str, job_id: str) -> tuple[int, bytes, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", web.port, timeout=30)
    connection.request("DELETE", f"/v1/batch/{job_id}", headers={"Authorization": f"Bearer {key}"})
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body, response.headers


def test_the_python_client_in_the_api_docs_follows_a_job_to_its_end(web, agent):
    caller, client = agent
    job = make_job(caller, "done", targets=[done_target(), done_target()])
    docs = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text()
    source = docs.split("```python\n", 1)[1].split("```", 1)[0]
    assert len([line for line in source.splitlines() if line.strip()]) <= 15
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # the documentation's own example
    events = list(namespace["follow"](job.id, client.raw_key, "127.0.0.1", web.port))
    assert [(event, data.get("seq")) for event, data in events] == [
        ("target", 1),
        ("target", 2),
        ("job", None),
    ]
    assert events[-1][1]["status"] == "done"
