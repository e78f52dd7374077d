"""A render slot holds for the whole render (issue 24, point 7): each step of a render's longest
path has its own bound, and the slot's lease outlasts their sum (docs/rendering.md, "How it works").

No browser here: a stand-in render process on the render socket answers the way a stuck, slow
or crashing one would, and its "pid" is a ``sleep`` the stop kills.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.utils import timezone

from fetch import client, gate, limits, pipeline
from fetch.errors import FetchError
from fetch.models import RenderSlot
from fetch.outcomes import Outcome
from fetch.render import renderer, server_process
from fetch.targets import Target

DOCUMENT = client.Download(
    url="http://127.0.0.1:9/page",
    final_url="http://127.0.0.1:9/page",
    status=200,
    headers={},
    content_type="text/html",
    charset="utf-8",
    body=b"<p>page</p>",
    elapsed_ms=1,
)


class StandIn:
    """A render process that reads its job, then stays ``silent``, says ``started`` and stays
    silent, or ``crash``es (closes the connection); its pid is a ``sleep`` of its own."""

    def __init__(self, path: Path, behaviour: str) -> None:
        self.behaviour = behaviour
        self.process = subprocess.Popen(["sleep", "120"])
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen()
        self.kept: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with self.sock:
            while True:
                try:
                    connection, _ = self.sock.accept()
                except OSError:
                    return
                threading.Thread(target=self._talk, args=(connection,), daemon=True).start()

    def _talk(self, connection: socket.socket) -> None:
        try:
            connection.sendall(json.dumps({"pid": self.process.pid}).encode() + b"\n")
            job = connection.recv(65536)
            if self.behaviour == "started" and job:  # not a probe that only asked the pid
                connection.sendall(b'{"started": true}\n')
        except OSError:
            return
        if self.behaviour == "crash" or not job:
            connection.close()
            return
        self.kept.append(connection)

    def close(self) -> None:
        self.sock.close()
        for connection in self.kept:
            connection.close()
        self.process.kill()
        self.process.wait()


@pytest.fixture
def stand_in(settings, tmp_path, monkeypatch) -> Iterator[type[StandIn]]:
    made: list[StandIn] = []
    settings.SIFT_RENDER_SOCKET = str(tmp_path / "render.sock")
    settings.SIFT_RENDER_TIMEOUT = 1
    monkeypatch.setattr(renderer, "START_SECONDS", 1.0)

    def make(behaviour: str) -> StandIn:
        made.append(StandIn(tmp_path / "render.sock", behaviour))
        return made[-1]

    yield make  # type: ignore[misc]
    for one in made:
        one.close()


def attempt_bound() -> float:
    """One attempt's bound with the test's start and render deadlines (1 s each)."""
    return server_process.START_SECONDS + 1 + limits.RENDER_STOP_SECONDS


def test_the_lease_is_the_longest_path_and_a_margin(settings):
    settings.SIFT_FETCH_TIMEOUT, settings.SIFT_RENDER_TIMEOUT = 30, 20
    attempt = limits.RENDER_START_SECONDS + 20 + limits.RENDER_STOP_SECONDS
    assert (
        renderer.render_lease_seconds()
        == limits.GATE_WAIT_SECONDS + 30 + 2 * attempt + gate.LEASE_MARGIN_SECONDS
    )
    # The stop's own waits fit its bound: the render given up alone, else the pid asked for, then
    # the tree's end after SIGKILL.
    stop = (
        server_process.ABANDON_SECONDS
        + server_process.PROBE_SECONDS
        + server_process.KILL_WAIT_SECONDS
        + server_process.RESET_SECONDS
    )
    assert stop < limits.RENDER_STOP_SECONDS


def test_a_render_process_that_never_starts_the_browser_is_stopped_within_its_bound(stand_in):
    stuck = stand_in("silent")
    began = time.monotonic()
    with pytest.raises(FetchError) as raised:
        renderer.render(DOCUMENT)
    assert raised.value.outcome == Outcome.TIMEOUT
    assert time.monotonic() - began < attempt_bound()
    assert stuck.process.wait(timeout=5) == -9  # the stop killed the render process's tree


def test_a_render_that_never_ends_is_stopped_within_start_render_and_stop(stand_in):
    stuck = stand_in("started")
    began = time.monotonic()
    with pytest.raises(FetchError, match="did not finish rendering"):
        renderer.render(DOCUMENT)
    took = time.monotonic() - began
    assert 1 <= took < attempt_bound()
    assert stuck.process.wait(timeout=5) == -9


def test_a_render_crashing_twice_ends_within_two_attempts(stand_in):
    stand_in("crash")
    began = time.monotonic()
    with pytest.raises(FetchError) as raised:
        pipeline._render_retrying_once(DOCUMENT, Target(DOCUMENT.url))
    assert raised.value.outcome == Outcome.INTERNAL
    assert time.monotonic() - began < 2 * attempt_bound()


@pytest.mark.django_db
def test_a_render_slot_is_leased_for_the_longest_path_and_keeps_a_second_render_out(settings, monkeypatch):
    settings.SIFT_RENDER_SLOTS = 1
    monkeypatch.setattr(gate, "GATE_WAIT_SECONDS", 0.2)
    with renderer.render_slot("alice"):
        lease_until = RenderSlot.objects.get(number=0).lease_until
        assert lease_until is not None
        assert (lease_until - timezone.now()).total_seconds() > renderer.render_lease_seconds() - 5
        with pytest.raises(FetchError) as busy, renderer.render_slot("bob"):
            pass
        assert busy.value.outcome == Outcome.BUSY
