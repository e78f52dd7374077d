"""The batch latency benchmark's yardstick: its upstream delays, the ideal schedule, the slow upstream."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from bench.batch_latency import (
    MAX_DELAY,
    MIN_DELAY,
    N_TARGETS,
    ideal_schedule,
    slow_upstream,
    upstream_delays,
)


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
