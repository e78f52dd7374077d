"""The web process's edge under the Procfile's gunicorn, real HTTP: request bodies refused while
they are read, and clients that do not read holding nothing for long (docs/security.md, "One
caller against the others"; ``doors/middleware.py``, ``doors/rest/job_body.py``,
``doors/streams.py``)."""

from __future__ import annotations

import http.client
import json
import select
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from batch.models import ApiKey, BatchJob, EventStream

from .deployment import Deployment, wait_for
from .factories import MakeCaller, done_target, make_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]

SEND_TIMEOUT = 3  # seconds
ENV = {
    "SIFT_SEND_TIMEOUT": f"{SEND_TIMEOUT}s",
    "SIFT_BATCH_READS_PER_CALLER": "1",
    "SIFT_BATCH_STREAMS_PER_CALLER": "2",
    "SIFT_BATCH_STREAM_KEEPALIVE": "1s",
}
LIMIT = 128 * 1024  # SIFT_MAX_REQUEST_BYTES
CHUNK = 64 * 1024
# Results of the large job: more than the kernel's send buffers hold, so an answer nobody reads
# stops the server's sending (a piece is a target here).
TARGETS, TARGET_BYTES = 12, 1024 * 1024


@pytest.fixture(scope="module")
def web(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Deployment]:
    with django_db_blocker.unblock():
        deployment = Deployment(tmp_path_factory.mktemp("edge"), ENV)
        deployment.start_procfile_web()
    try:
        yield deployment
    finally:
        deployment.stop_all()


# --- bodies ----------------------------------------------------------------------------------


def _chunks() -> Iterator[bytes]:
    """A chunked body that never ends (no last chunk), made as it is sent."""
    data = b'{"targets": ["https://example.org/' + b"a" * (CHUNK - 34)
    while True:
        yield b"%x\r\n" % len(data) + data + b"\r\n"


def _post_until_answered(
    web: Deployment, head: list[str], body: Iterator[bytes]
) -> tuple[int, dict[str, Any], int]:
    """Send ``head`` then ``body`` until the server answers (or 32 MiB have gone, or it stopped
    taking them); (status, JSON body, bytes of body sent)."""
    sock = socket.create_connection(("127.0.0.1", web.port), timeout=10)
    try:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        sent = 0
        for chunk in body:
            if select.select([sock], [], [], 0)[0] or sent >= 32 * 1024 * 1024:
                break
            try:
                sock.sendall(chunk)
            except OSError:  # it closed, or stopped reading: its answer is there
                break
            sent += len(chunk)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, json.loads(response.read()), sent
    finally:
        sock.close()


def _head(key: str | None, *extra: str) -> list[str]:
    head = ["POST /v1/batch HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *extra]
    return head + ([f"Authorization: Bearer {key}"] if key else [])


@pytest.mark.parametrize("authenticated", [False, True], ids=["no-key", "valid-key"])
def test_a_chunked_body_over_the_limit_is_refused_413_while_it_is_read(web, agent, authenticated):
    _, client = agent
    head = _head(client.raw_key if authenticated else None, "Transfer-Encoding: chunked")
    status, body, sent = _post_until_answered(web, head, _chunks())
    assert (status, body["code"]) == (413, "too_large")
    assert body["hint"]
    assert sent < 32 * 1024 * 1024  # answered before the body ended: it never does
    assert not BatchJob.objects.exists()


def test_a_declared_length_over_the_limit_is_refused_413_before_a_byte_of_the_body(web, agent):
    _, client = agent
    head = _head(client.raw_key, f"Content-Length: {100 * 1024 * 1024}")
    status, body, sent = _post_until_answered(web, head, iter([]))  # the headers alone
    assert (status, body["code"], sent) == (413, "too_large", 0)


# --- clients that do not read ----------------------------------------------------------------


def large_job(caller: ApiKey) -> BatchJob:
    targets = [done_target("x" * TARGET_BYTES, n_bytes=TARGET_BYTES) for _ in range(TARGETS)]
    return make_job(caller, "done", targets=targets, n_bytes=TARGETS * TARGET_BYTES)


class Unread:
    """A GET whose client reads its status line, then nothing (a receive buffer of 4 KiB)."""

    def __init__(self, web: Deployment, key: str, path: str) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.settimeout(30)
        self.sock.connect(("127.0.0.1", web.port))
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\r\n".encode()
        )
        self.status = int(self._line().split()[1])

    def _line(self) -> bytes:
        line = b""
        while not line.endswith(b"\r\n"):
            line += self.sock.recv(1)
        return line

    def rest(self) -> int:
        """Read to the end the server made; how many bytes there were."""
        total = 0
        while data := self.sock.recv(1024 * 1024):
            total += len(data)
        self.sock.close()
        return total


DROPPED = "took none of its answer"  # the web process's log line for an answer it dropped


def dropped(web: Deployment, before: int, count: int) -> None:
    """Wait until the web process has dropped ``count`` answers nobody read since ``before`` were."""
    wait_for(lambda: web.log("web").count(DROPPED) >= before + count, timeout=6 * SEND_TIMEOUT, what="drops")


@pytest.fixture
def unread() -> Iterator[list[Unread]]:
    held: list[Unread] = []
    yield held
    for client in held:
        client.sock.close()


def test_large_answers_nobody_reads_are_counted_per_caller_and_dropped_after_the_send_timeout(
    web, make_caller: MakeCaller, unread
):
    caller, client = make_caller("hoarder")
    job = large_job(caller)
    drops = web.log("web").count(DROPPED)
    path = f"/v1/batch/{job.id}"
    # One read share per caller in each of the two worker processes: a third read is refused.
    unread += [Unread(web, client.raw_key, path) for _ in range(3)]
    assert 429 in [u.status for u in unread]
    other, other_client = make_caller("other")
    small = make_job(other, "done", targets=[done_target()])
    assert web.request(f"/v1/batch/{small.id}", other_client.raw_key)[0] == 200
    # Past the send timeout the answers nobody read are dropped, cut short, and the shares free.
    held = [u for u in unread if u.status == 200]
    dropped(web, drops, len(held))
    for client_ in held:
        assert client_.rest() < TARGETS * TARGET_BYTES
    status, body, _ = web.request(path, client.raw_key)
    assert status == 200
    assert len(json.loads(body)["targets"]) == TARGETS


def test_event_streams_nobody_reads_are_closed_and_stop_counting(web, make_caller: MakeCaller, unread):
    caller, client = make_caller("streamer")
    job = large_job(caller)
    path = f"/v1/batch/{job.id}/events"
    drops = web.log("web").count(DROPPED)
    unread += [Unread(web, client.raw_key, path) for _ in range(2)]
    assert [u.status for u in unread] == [200, 200]
    assert Unread(web, client.raw_key, path).status == 429  # the caller's two streams are open
    # Their clients take nothing: their rows stop counting once their leases are not renewed
    # (which may come a moment before the send timeout), and the streams are closed.
    admitted = wait_for(
        lambda: (answer := Unread(web, client.raw_key, path)).status == 200 and answer,
        timeout=6 * SEND_TIMEOUT,
        what="a stream to be admitted once the unread ones were closed",
    )
    unread.append(admitted)
    dropped(web, drops, 2)
    for stalled in unread[:2]:
        assert stalled.rest() < TARGETS * TARGET_BYTES
    assert EventStream.objects.filter(caller=caller).count() <= 2
