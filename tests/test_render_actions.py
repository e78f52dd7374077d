"""``actions`` and ``screenshot`` on rendered pages (docs/rendering.md, "Actions", "Screenshots"):
each step and its failure, the refusals of navigation, downloads and windows, the pictures'
format and caps, and the three doors."""

from __future__ import annotations

import base64
import ipaddress
import struct
from collections.abc import Iterator

import mcp_types as types
import pytest

from batch import jobs, pipeline_bridge
from batch.engine import worker
from doors.mcp import tools
from doors.validation import validate_targets
from fetch.render import server_process

from .browsers import BROWSER_TESTS

pytestmark = BROWSER_TESTS
ONLY_127_0_0_1 = (ipaddress.ip_network("127.0.0.1/32"),)
INTRO = "Neap tides come a week after the spring tides, when the Sun and the Moon pull at right angles."
MORE = "Harbour masters plan the dredging by the smallest range of the month."
LATE = "The tide table for next week was posted late on Sunday evening."
PRESSED = "The keyboard brought the tide table for the week after."
PAGE = f"""<!doctype html><html lang="en"><head><title>Tides</title>
<style>li {{ height: 120px; }}</style></head><body>
<main><article id="story"><h1>Tides</h1><p>{INTRO}</p>
<button id="more">Read more</button>
<a id="away" href="/elsewhere">Elsewhere</a>
<a id="file" href="/file.bin" download>The table as a file</a>
<button id="window" onclick="window.open('/popup')">Open the table</button>
<button id="save" onclick="const a = document.createElement('a'); a.download = 'tides.txt';
  a.href = window.URL.createObjectURL(new Blob(['tides'])); a.click()">Save the table</button>
<button id="fetch-file" onclick="const a = document.createElement('a'); a.download = 'tides.bin';
  a.href = '/file.bin'; document.body.appendChild(a); a.click()">Get the table</button>
<form action="/search" method="get"><input name="q" value="tides"><button id="go">Go</button></form>
<ul id="list"></ul></article></main>
<script>
const story = document.getElementById("story");
const add = (text) => {{ const p = document.createElement("p"); p.textContent = text;
  story.appendChild(p); }};
document.getElementById("more").addEventListener("click", () =>
  fetch("/more.json").then((r) => r.json()).then((d) => add(d.text)));
let part = 0;
const next = () => {{ part += 1; fetch("/items?part=" + part).then((r) => r.json()).then((d) => {{
  for (const text of d.items) {{ const li = document.createElement("li"); li.textContent = text;
    document.getElementById("list").appendChild(li); }} }}); }};
next();
window.addEventListener("scroll", () => {{
  if (window.innerHeight + window.scrollY >= document.body.scrollHeight - 20) next(); }});
setTimeout(() => {{ const p = document.createElement("p"); p.id = "late"; p.textContent = {LATE!r};
  story.appendChild(p); }}, 1500);
document.addEventListener("keydown", (event) => {{ if (event.key === "Enter") add({PRESSED!r}); }});
</script></body></html>"""


@pytest.fixture(autouse=True, scope="module")
def render_process_stopped_after_the_module() -> Iterator[None]:
    yield
    server_process.stop_server()


@pytest.fixture
def site(httpserver, settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = ONLY_127_0_0_1
    settings.SIFT_RENDER_TIMEOUT = 15
    settings.SIFT_CACHE_TTL = 900
    httpserver.expect_request("/tides").respond_with_data(PAGE, content_type="text/html")
    httpserver.expect_request("/more.json").respond_with_json({"text": MORE})
    for part in range(1, 8):
        items = [f"Item {part}.{n}: the tide at a harbour of the coast." for n in range(5)]
        httpserver.expect_request("/items", query_string=f"part={part}").respond_with_json({"items": items})
    for path in ("/elsewhere", "/file.bin", "/popup", "/search"):
        httpserver.expect_request(path).respond_with_data("<p>not for a render</p>", content_type="text/html")
    return httpserver


def _with(client, site, options: dict, path: str = "/tides"):
    body = {"url": site.url_for(path), "options": {"render": True, "mode": "text", **options}}
    return client.post("/v1/fetch", body)


def _asked(site, path: str) -> bool:
    return any(request.path == path for request, _ in site.log)


def test_a_click_reveals_what_the_page_keeps_behind_a_button(agent, site):
    _, client = agent
    plain = _with(client, site, {}).json()
    clicked = _with(client, site, {"actions": [{"type": "click", "selector": "#more"}]}).json()

    assert MORE not in plain["content"]
    assert MORE in clicked["content"]
    assert INTRO in clicked["content"]


def test_scroll_times_loads_as_many_more_parts_of_an_endless_list(agent, site):
    _, client = agent
    answer = _with(client, site, {"actions": [{"type": "scroll", "times": 3}]}).json()

    assert "Item 4.0" in answer["content"]
    assert "Item 5.0" not in answer["content"]


def test_wait_for_and_wait_let_a_late_paragraph_come(agent, site):
    _, client = agent
    plain = _with(client, site, {}).json()
    waited_for = _with(client, site, {"actions": [{"type": "wait_for", "selector": "#late"}]}).json()
    waited = _with(client, site, {"actions": [{"type": "wait", "milliseconds": 1800}]}).json()

    assert LATE not in plain["content"]
    assert LATE in waited_for["content"]
    assert LATE in waited["content"]


def test_press_sends_a_key_to_the_page(agent, site):
    _, client = agent
    answer = _with(client, site, {"actions": [{"type": "press", "key": "Enter"}]}).json()

    assert PRESSED in answer["content"]


@pytest.mark.parametrize(
    ("step", "words"),
    [
        ({"type": "click", "selector": "#nothing"}, "no element matches '#nothing'"),
        ({"type": "click", "selector": "p[["}, "not a valid selector"),
        ({"type": "wait_for", "selector": "#never"}, "was shown in time"),
    ],
)
def test_a_failing_step_answers_action_failed_naming_its_index(agent, site, step, words):
    _, client = agent
    response = _with(client, site, {"actions": [{"type": "click", "selector": "#more"}, step]})

    assert response.status_code == 422, response.content
    body = response.json()
    assert (body["code"], body["action"]) == ("action_failed", 1)
    assert body["error"].startswith("actions[1] failed")
    assert words in body["error"]
    assert "0" in body["hint"]


@pytest.mark.parametrize(
    ("selector", "path", "what"),
    [
        ("#away", "/elsewhere", "take the page elsewhere"),
        ("#go", "/search", "take the page elsewhere"),
        ("#window", "/popup", "open a window"),
    ],
)
def test_no_step_navigates_the_page_nor_opens_a_window(agent, site, selector, path, what):
    _, client = agent
    response = _with(client, site, {"actions": [{"type": "click", "selector": selector}]})

    assert response.status_code == 422, response.content
    body = response.json()
    assert (body["code"], body["action"]) == ("action_failed", 0)
    assert what in body["error"]
    assert not _asked(site, path)


def test_a_click_on_a_link_to_download_a_file_is_refused_and_nothing_is_asked_for(agent, site):
    _, client = agent
    response = _with(client, site, {"actions": [{"type": "click", "selector": "#file"}]})

    assert response.status_code == 422, response.content
    assert (response.json()["action"], response.json()["code"]) == (0, "action_failed")
    assert "download a file" in response.json()["error"]
    assert not _asked(site, "/file.bin")


@pytest.mark.parametrize("selector", ["#save", "#fetch-file"])
def test_a_download_a_script_starts_fails_its_step_and_nothing_is_asked_for(agent, site, selector):
    _, client = agent
    response = _with(client, site, {"actions": [{"type": "click", "selector": selector}]})

    assert response.status_code == 422, response.content
    assert (response.json()["action"], response.json()["code"]) == (0, "action_failed")
    assert "download a file" in response.json()["error"]
    assert not _asked(site, "/file.bin")


def test_actions_past_the_render_deadline_end_timeout(agent, site, settings):
    _, client = agent
    settings.SIFT_RENDER_TIMEOUT = 2
    response = _with(client, site, {"actions": [{"type": "wait", "milliseconds": 10_000}]})

    assert response.status_code == 504, response.content
    assert response.json()["code"] == "timeout"


def test_renders_with_actions_are_never_cached_nor_serve_a_plain_render(agent, site):
    _, client = agent
    steps = {"actions": [{"type": "click", "selector": "#more"}]}
    first, second = _with(client, site, steps).json(), _with(client, site, steps).json()
    plain = _with(client, site, {}).json()

    assert (first["cache"], second["cache"], plain["cache"]) == ("miss", "miss", "miss")
    assert MORE not in plain["content"]


def test_actions_are_refused_in_a_query_with_a_hint_and_without_a_render(agent):
    _, client = agent
    queried = client.get("/v1/fetch", url="https://example.org/", render="true", actions="[]")
    unrendered = client.post(
        "/v1/fetch",
        {"url": "https://example.org/", "options": {"actions": [{"type": "wait", "milliseconds": 5}]}},
    )

    assert queried.status_code == 400
    assert "POST" in queried.json()["hint"]
    assert unrendered.status_code == 400
    assert "render" in unrendered.json()["hint"]


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_a_viewport_screenshot_is_a_png_of_the_viewport(agent, site):
    _, client = agent
    answer = _with(client, site, {"screenshot": "viewport"}).json()

    picture = answer["screenshot"]
    assert (picture["kind"], picture["type"]) == ("viewport", "image/png")
    assert (
        _png_size(base64.b64decode(picture["data"])) == (picture["width"], picture["height"]) == (1280, 720)
    )
    assert INTRO in answer["content"]


def test_a_full_screenshot_is_as_tall_as_the_page_up_to_its_cap(agent, site):
    _, client = agent
    site.expect_request("/tall").respond_with_data(
        '<main><p>A very tall page of tides.</p><div style="height:40000px"></div></main>',
        content_type="text/html",
    )
    full = _with(client, site, {"screenshot": "full"}).json()["screenshot"]
    tall = _with(client, site, {"screenshot": "full"}, path="/tall").json()["screenshot"]

    width, height = _png_size(base64.b64decode(full["data"]))
    assert (width, height) == (full["width"], full["height"])
    assert 720 < height < 16_384
    assert tall["height"] == 16_384
    assert _png_size(base64.b64decode(tall["data"]))[1] == 16_384


def test_a_picture_past_two_megabytes_as_png_comes_as_a_jpeg_within_five(agent, site):
    _, client = agent
    noise = """<main><p>Static on the harbour camera.</p></main><canvas id="c" width="1280" height="720"
style="position:absolute;top:0;left:0"></canvas><script>
const c = document.getElementById("c").getContext("2d"); const image = c.createImageData(1280, 720);
for (let i = 0; i < image.data.length; i++) image.data[i] = i % 4 === 3 ? 255 : Math.random() * 256;
c.putImageData(image, 0, 0);</script>"""
    site.expect_request("/noise").respond_with_data(noise, content_type="text/html")
    picture = _with(client, site, {"screenshot": "viewport", "consent": "leave"}, path="/noise").json()[
        "screenshot"
    ]

    data = base64.b64decode(picture["data"])
    assert picture["type"] == "image/jpeg"
    assert data[:3] == b"\xff\xd8\xff"
    assert len(data) <= 5 * 1024 * 1024


def test_a_screenshot_renders_anew_beside_a_cached_copy_and_needs_render_true(agent, site):
    _, client = agent
    first = _with(client, site, {}).json()
    pictured = _with(client, site, {"screenshot": "viewport"}).json()
    auto = client.post(
        "/v1/fetch", {"url": site.url_for("/tides"), "options": {"render": "auto", "screenshot": "full"}}
    )

    assert (first["cache"], pictured["cache"]) == ("miss", "miss")
    assert "screenshot" in pictured
    assert "screenshot" not in first
    assert auto.status_code == 400


def test_mcp_fetch_takes_actions_and_answers_the_screenshot_as_image_content(agent, site):
    caller, _ = agent
    arguments = {
        "url": site.url_for("/tides"),
        "render": True,
        "actions": [{"type": "click", "selector": "#more"}],
        "screenshot": "viewport",
    }
    result = tools.as_result(tools.TOOLS["fetch"], tools.call(tools.TOOLS["fetch"], caller, arguments))

    assert not result.is_error
    texts = [block for block in result.content if isinstance(block, types.TextContent)]
    images = [block for block in result.content if isinstance(block, types.ImageContent)]
    assert MORE in texts[1].text
    assert '"width": 1280' in texts[0].text
    assert '"data"' not in texts[0].text
    assert [image.mime_type for image in images] == ["image/png"]
    assert _png_size(base64.b64decode(images[0].data)) == (1280, 720)


def test_mcp_fetch_names_the_failing_step(agent, site):
    caller, _ = agent
    arguments = {
        "url": site.url_for("/tides"),
        "render": True,
        "actions": [{"type": "click", "selector": "#x"}],
    }
    outcome = tools.call(tools.TOOLS["fetch"], caller, arguments)

    assert (outcome.body["code"], outcome.body["action"]) == ("action_failed", 0)


def test_a_batch_target_runs_its_actions_and_keeps_its_screenshot_beside_the_content(agent, site, settings):
    caller, client = agent
    settings.SIFT_BATCH_WORKERS = 1
    options = {"render": True, "actions": [{"type": "click", "selector": "#more"}], "screenshot": "viewport"}
    failing = {"render": True, "actions": [{"type": "wait_for", "selector": "#never"}]}
    url = site.url_for("/tides")
    job = jobs.submit(
        caller, validate_targets([{"url": url, "options": options}, {"url": url, "options": failing}])
    ).job

    assert worker.drain(pipeline_bridge.fetch_target, budget=90) == 2

    done, failed = client.get(f"/v1/batch/{job.id}").json()["targets"]
    assert MORE in done["result"]["content"]
    assert _png_size(base64.b64decode(done["result"]["screenshot"]["data"])) == (1280, 720)
    assert "screenshot" not in done["result"]["meta"]
    assert (failed["status"], failed["outcome"]) == ("failed", "action_failed")
    assert "actions[0]" in failed["error"]
    without = client.get(f"/v1/batch/{job.id}", content="false").json()["targets"][0]["result"]
    assert "screenshot" not in without
    assert "content" not in without
    job.refresh_from_db()
    assert job.n_bytes > len(done["result"]["screenshot"]["data"])
