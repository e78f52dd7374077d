"""A render's subrequests without a browser (``fetch/render/subrequests.py``): per-host queues,
and nothing fetched once the render ended. The GETs are counted at a site on loopback."""

from __future__ import annotations

import ipaddress
import threading
import time
from typing import Any

from fetch.render.subrequests import Subrequests

from .sites import Answer, site


def _collector() -> tuple[list[dict[str, Any]], Any]:
    answers: list[dict[str, Any]] = []
    lock = threading.Lock()

    def send(header: dict[str, Any], body: bytes) -> None:
        with lock:
            answers.append(header)

    return answers, send


def test_a_hosts_queue_is_fetched_in_order_within_its_share_and_stops_when_the_render_ends(settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = (ipaddress.ip_network("127.0.0.0/8"),)
    settings.SIFT_RENDER_PER_HOST = 1
    answers, send = _collector()
    with site(routes={f"/{n}": Answer(delay=0.3) for n in range(10)}) as slow, site("127.0.0.3") as quick:
        quick.routes["/"] = Answer()
        subrequests = Subrequests(send, lambda: 30.0)
        for n in range(10):
            subrequests.submit({"fetch": slow.url(f"/{n}"), "id": n})
        subrequests.submit({"fetch": quick.url("/"), "id": 99})
        deadline = time.monotonic() + 20
        while not any(a["id"] == 99 for a in answers) and time.monotonic() < deadline:
            time.sleep(0.01)
        quick_done = len([a for a in answers if a["id"] != 99])  # slow ones answered before it
        subrequests.close()
        at_close = len(slow.arrivals)
        time.sleep(1.0)
        asked = [path for path, _ in slow.arrivals]
    assert any(a["id"] == 99 and a["status"] == 200 for a in answers)
    assert quick_done <= 2  # the other host did not wait behind the slow host's queue
    assert asked == [f"/{n}" for n in range(len(asked))]  # one at a time, in the page's order
    assert len(asked) <= at_close + 1  # none begun after the render ended (one may be on its way)
    assert subrequests.cut() is None
