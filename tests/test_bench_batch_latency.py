"""The batch latency benchmark's yardstick: its upstream delays, the ideal schedule, the slow upstream."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils.module_loading import import_string

from batch.engine.seam import Caller, allowed_test_fetch
from bench import plain_get
from bench.batch_latency import (
    FETCHES,
    MAX_DELAY,
    MIN_DELAY,
    N_TARGETS,
    Client,
    Run,
    ideal_schedule,
    slow_upstream,
    upstream_delays,
)
from fetch.targets import Target


def test_upstream_delays_are_the_same_in_every_run_and_within_their_range():
    delays = upstream_delays()
    assert delays == upstream_delays()
    assert len(delays) == N_TARGETS
    assert all(MIN_DELAY <= d <= MAX_DELAY for d in delays)
    assert len(set(delays)) > N_TARGETS // 2  # varied, not one delay repeated


def test_ideal_schedule_gives_each_target_in_order_to_the_first_free_lane():
    # Lane A takes 1 then 3 (it is free first), lane B takes 2: A ends last, at 4.
    assert ideal_schedule([1, 2, 3]) == 4
    assert ideal_schedule([3, 1, 1, 1]) == 3
    assert ideal_schedule([1, 2, 3], lanes=1) == 6


def test_slow_upstream_serves_each_target_page_and_counts_each_runs_requests():
    with slow_upstream([0.0, 0.01]) as server:
        urls = server.urls("r1")
        with urllib.request.urlopen(urls[1], timeout=10) as response:
            body = response.read().decode()
            assert response.headers["Content-Type"].startswith("text/html")
        assert "Article 1" in body
        assert server.served == {"r1": 1}
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(urls[1].replace("/01.html", "/02.html"), timeout=10)
        assert missing.value.code == 404


class ClosesIdleConnections(BaseHTTPRequestHandler):
    """Answers on a keep-alive connection, then closes it without a word, as gunicorn does to an
    idle one; counts the requests it answered."""

    protocol_version = "HTTP/1.1"
    answered = 0

    def do_GET(self) -> None:
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        type(self).answered += 1  # before the answer leaves, so the client never reads ahead of it
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_the_client_sends_again_on_a_new_connection_when_the_server_closed_the_idle_one():
    ClosesIdleConnections.answered = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), ClosesIdleConnections)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = Client(server.server_address[1], "key")
    try:
        assert client.call("GET", "/a") == (200, {"ok": True})
        time.sleep(0.2)  # the server has closed the connection by now
        assert client.call("GET", "/b") == (200, {"ok": True})
        assert ClosesIdleConnections.answered == 2
    finally:
        client.close()
        server.shutdown()
        server.server_close()


def test_the_targets_own_schedule_is_compared_with_the_same_ideal():
    run = Run("1", seconds=4.4, ideal=4.0, own=4.2, cpu_other=0.0)
    assert run.ratio == pytest.approx(1.1)
    assert run.own_ratio == pytest.approx(1.05)


@pytest.mark.parametrize("choice", sorted(FETCHES))
def test_each_fetch_choice_is_the_pipeline_or_a_stand_in_the_workers_accept(choice):
    path = FETCHES[choice][1]
    assert path == "" or (allowed_test_fetch(path) and callable(import_string(path)))


def test_the_plain_get_downloads_a_loopback_page_and_times_it():
    with slow_upstream([0.0, 0.05]) as server:
        url = server.urls("plain")[1]
        result = plain_get.get(Caller("bench", "default"), Target.from_stored(url, {}))
        assert server.served == {"plain": 1}
    assert "Article 1" in result["content"]
    assert result["meta"]["elapsed_ms"] >= 50


@pytest.mark.parametrize("url", ["http://127.0.0.2:8/x.html", "https://127.0.0.1:8/x.html"])
def test_the_plain_get_fetches_nothing_but_plain_http_on_127_0_0_1(url):
    with pytest.raises(ValueError, match=r"127\.0\.0\.1 only"):
        plain_get.get(Caller("bench", "default"), Target.from_stored(url, {}))
