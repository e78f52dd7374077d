"""When a rendered page is ready (docs/rendering.md, "When a page is ready"): what the page still
waits for is waited for, however short the quiet window, and the DOM is read as the browser has it
whatever the page did to its own serializers."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from werkzeug import Request, Response

from fetch.render import server_process
from fetch.sandbox import proctree

from .browsers import BROWSER_TESTS
from .test_render import ONLY_127_0_0_1

pytestmark = BROWSER_TESTS


@pytest.fixture(autouse=True, scope="module")
def render_process_stopped_after_the_module():
    yield
    server_process.stop_server()


@pytest.fixture
def ready_settings(settings) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = ONLY_127_0_0_1
    settings.SIFT_RENDER_TIMEOUT = 10


def _render_timed(client, httpserver, path: str) -> tuple[Any, float]:
    """``/v1/fetch`` of the page at ``path`` with ``render: true``, and how long it took."""
    began = time.monotonic()
    response = client.get("/v1/fetch", url=httpserver.url_for(path), render="true")
    return response, time.monotonic() - began


WRITE = (
    "function write(text) {"
    " const p = document.createElement('p'); p.textContent = text; out.appendChild(p); }"
)
LATE_PAGE = f"""<!doctype html><html lang="en"><head><title>Late</title></head><body>
<main><article id="out"><h1>Late writers</h1>
<p class="secret">The late stylesheet hides this sentence about the harbour master.</p></article></main>
<script>
const out = document.getElementById("out");
{WRITE}
requestAnimationFrame(() => requestAnimationFrame(() => write("Two animation frames wrote this sentence.")));
fetch("/late.json").then(r => new Promise(done => setTimeout(() => done(r), 20)))
  .then(r => r.json()).then(body => write(body.sentence));
setTimeout("write('A timer given as a string wrote this sentence.')", 40);
window.addEventListener("load", () => {{
  const script = document.createElement("script"); script.src = "/late.js"; document.body.appendChild(script);
  const sheet = document.createElement("link"); sheet.rel = "stylesheet"; sheet.href = "/late.css";
  document.head.appendChild(sheet);
}});
</script></body></html>"""
SENTENCES = [
    "Two animation frames wrote this sentence.",
    "A fetch whose body was read late wrote this sentence.",
    "A timer given as a string wrote this sentence.",
    "A script added after load wrote this sentence.",
]


def _slow(body: str, content_type: str, seconds: float):
    def answer(request: Request) -> Response:
        time.sleep(seconds)
        return Response(body, content_type=content_type)

    return answer


def test_what_a_page_still_waits_for_after_load_is_waited_for(agent, httpserver, ready_settings):
    _, client = agent
    httpserver.expect_request("/late").respond_with_data(LATE_PAGE, content_type="text/html")
    httpserver.expect_request("/late.json").respond_with_json({"sentence": SENTENCES[1]})
    script = f"write({SENTENCES[3]!r});"
    httpserver.expect_request("/late.js").respond_with_handler(_slow(script, "text/javascript", 0.2))
    sheet = ".secret { display: none }"
    httpserver.expect_request("/late.css").respond_with_handler(_slow(sheet, "text/css", 0.2))

    response = client.get("/v1/fetch", url=httpserver.url_for("/late"), render="true")

    assert response.status_code == 200, response.content
    content = response.json()["content"]
    for sentence in SENTENCES:
        assert sentence in content
    assert "harbour master" not in content  # hidden by the stylesheet added after load


TAMPERED_PAGE = """<!doctype html><html lang="en"><head><title>Tampered</title></head><body>
<main><article><h1>Tampered</h1><p>The real sentence about spring tides stays in the answer.</p>
<p style="display: none">A hidden sentence about the lighthouse keeper.</p></article></main>
<script>
Object.defineProperty(Element.prototype, "outerHTML", {get() { return "<body>a fake page</body>"; }});
window.XMLSerializer = undefined;
MessagePort.prototype.postMessage = function () {};
</script></body></html>"""


def test_the_dom_is_read_with_the_browsers_own_serializer_and_readiness_its_own_channel(
    agent, httpserver, ready_settings
):
    _, client = agent
    httpserver.expect_request("/tampered").respond_with_data(TAMPERED_PAGE, content_type="text/html")

    response, took = _render_timed(client, httpserver, "/tampered")

    assert response.status_code == 200, response.content
    assert took < 1.5
    content = response.json()["content"]
    assert "The real sentence about spring tides" in content
    assert "fake page" not in content
    assert "lighthouse keeper" not in content  # the hidden marks are in what was read


POLLING_PAGE = """<!doctype html><html lang="en"><head><title>Polling</title></head><body>
<main><article id="out"><h1>Polling</h1></article></main>
<script>
const out = document.getElementById("out");
setInterval(() => fetch("/tick.json").then(r => r.json())
  .then(t => { document.title = "tick " + t.n; }), 150);
(function again() { requestAnimationFrame(again); out.dataset.frame = String(performance.now()); })();
fetch("/tick.json").then(r => r.json()).then(() => {
  const p = document.createElement("p"); p.textContent = "The polling page wrote this sentence once.";
  out.appendChild(p);
});
</script></body></html>"""


def test_a_page_polling_and_animating_forever_is_read_well_before_the_cap(agent, httpserver, ready_settings):
    _, client = agent
    httpserver.expect_request("/polling").respond_with_data(POLLING_PAGE, content_type="text/html")
    httpserver.expect_request("/tick.json").respond_with_json({"n": 1})
    render_once = client.get("/v1/fetch", url=httpserver.url_for("/polling?warm"), render="true")
    assert render_once.status_code == 200, render_once.content

    response, took = _render_timed(client, httpserver, "/polling")

    assert response.status_code == 200, response.content
    assert "The polling page wrote this sentence once." in response.json()["content"]
    assert took < 1.5  # the 2 s cap is for pages that keep counted work going; this one keeps none


def test_a_tree_is_over_a_memory_limit_by_its_pss_and_under_it_by_its_resident_size_alone(monkeypatch):
    pid = os.getpid()
    assert proctree.tree_over(pid, 1 << 20)  # this interpreter holds more than 1 MiB
    assert not proctree.tree_over(pid, 1 << 50)
    monkeypatch.setattr(proctree, "_pss", lambda pids: pytest.fail("no PSS read under the limit"))
    assert not proctree.tree_over(pid, 1 << 50)


CHECKING_PAGE = f"""<!doctype html><html lang="en"><head><title>Checking</title></head><body>
<main><article id="out"><h1>Checking</h1></article></main>
<script>
const out = document.getElementById("out");
{WRITE}
fetch("/data.json").then(r => r.json()).then(data => {{ window.data = data; }});
const every = setInterval(() => {{
  if (window.data) {{ clearInterval(every); write(window.data.first); }}
}}, 70);
(function check() {{ if (window.data) write(window.data.second); else setTimeout(check, 70); }})();
</script></body></html>"""


def test_a_page_checking_every_70_ms_whether_its_data_came_is_read_after_it_wrote(
    agent, httpserver, ready_settings
):
    _, client = agent
    httpserver.expect_request("/checking").respond_with_data(CHECKING_PAGE, content_type="text/html")
    data = {"first": "An interval found the data and wrote this.", "second": "A chain of timers wrote this."}
    answer = _slow(json.dumps(data), "application/json", 0.3)
    httpserver.expect_request("/data.json").respond_with_handler(answer)

    response = client.get("/v1/fetch", url=httpserver.url_for("/checking"), render="true")

    assert response.status_code == 200, response.content
    content = response.json()["content"]
    assert "An interval found the data and wrote this." in content
    assert "A chain of timers wrote this." in content


FRAMES_PAGE = f"""<!doctype html><html lang="en"><head><title>Frames</title></head><body>
<main><article id="out"><h1>Frames</h1></article></main>
<script>
const out = document.getElementById("out");
{WRITE}
let line = 0;
(function next() {{
  write("Frame " + (++line) + " wrote its line.");
  if (line < 12) requestAnimationFrame(next);
}})();
(function spin() {{ out.dataset.angle = String(performance.now() % 360); requestAnimationFrame(spin); }})();
</script></body></html>"""


def test_a_list_written_a_frame_at_a_time_is_read_whole_beside_an_endless_animation(
    agent, httpserver, ready_settings
):
    _, client = agent
    httpserver.expect_request("/frames").respond_with_data(FRAMES_PAGE, content_type="text/html")

    response, took = _render_timed(client, httpserver, "/frames")

    assert response.status_code == 200, response.content
    assert "Frame 12 wrote its line." in response.json()["content"]
    assert took < 1.5  # the animation, which changes no text, does not hold the page to the cap
