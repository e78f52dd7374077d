"""The render slot is held while the browser works, not while the page downloads (docs/rendering.md)."""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterator

import pytest
from django.db import connection

from fetch.models import FetchSlot, RenderSlot
from fetch.render import server_process

from .browsers import BROWSER_TESTS
from .deployment import wait_for
from .upstream import page_upstream

pytestmark = BROWSER_TESTS
PAGE = b"""<!doctype html><html lang="en"><head><title>Tides</title></head><body>
<main><article id="story"><h1>Tides</h1></article></main>
<script>
const p = document.createElement("p");
p.textContent = "Neap tides come a week after the spring tides, when the Sun and the Moon pull apart.";
document.getElementById("story").appendChild(p);
</script></body></html>"""


@pytest.fixture(autouse=True, scope="module")
def render_process_stopped_after_the_module() -> Iterator[None]:
    yield
    server_process.stop_server()


def test_a_page_slow_to_answer_holds_no_render_slot_and_another_callers_render_goes_on(make_caller, settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = (ipaddress.ip_network("127.0.0.1/32"),)
    settings.SIFT_RENDER_SLOTS = 1
    settings.SIFT_RENDER_TIMEOUT = 10
    _, slow_client = make_caller("slow")
    _, quick_client = make_caller("quick")
    answers = {}

    def render_slow_page(url: str) -> None:
        try:
            answers["slow"] = slow_client.get("/v1/fetch", url=url, render="true")
        finally:
            connection.close()

    with page_upstream(PAGE, "text/html", delay=10) as slow_port, page_upstream(PAGE, "text/html") as port:
        slow = threading.Thread(target=render_slow_page, args=(f"http://127.0.0.1:{slow_port}/tides",))
        slow.start()
        wait_for(lambda: FetchSlot.objects.exclude(holder="").exists(), what="the slow page's download")
        render_slots_during_the_download = RenderSlot.objects.exclude(holder="").count()
        quick = quick_client.get("/v1/fetch", url=f"http://127.0.0.1:{port}/tides", render="true")
        slow.join()

    assert quick.status_code == 200, quick.content
    assert quick.json()["rendered"] is True
    assert "Neap tides" in quick.json()["content"]
    assert render_slots_during_the_download == 0
    assert answers["slow"].status_code == 200, answers["slow"].content
    assert answers["slow"].json()["rendered"] is True
