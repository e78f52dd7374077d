"""HTML extraction is bounded like the other children: a huge or heavy page costs a sandbox child
its limits, never the memory or the time of a web or worker process. A child out of memory
answers ``memory_limit``, one out of time ``filter_timeout``, whatever kind of document it read,
on ``/v1/fetch`` and in a batch target alike."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from batch import jobs, pipeline_bridge
from batch.engine import worker
from doors.validation import validate_targets
from fetch import extract as extract_module
from fetch.documents import json_text, pdf_text
from fetch.errors import FetchError
from fetch.extract import HTML_MEMORY_HINT, HTML_TIME_HINT, extract
from fetch.sandbox import pool as sandbox_module
from fetch.sandbox.pool import Sandbox
from fetch.targets import TargetOptions

from .factories import LOOPBACK
from .fixtures.pdf_writer import build_pdf_from_streams, flate_bomb_stream

ROOT = Path(__file__).resolve().parent.parent
URL = "https://news.example/big"
PEAK_LIMIT_BYTES = 300_000_000
ARTICLE = (
    "<html lang='en'><head><title>Tides</title></head><body><article><h1>Tides</h1>"
    + "<p>Tides are the rise and fall of the sea, caused by the Moon and the Sun together.</p>" * 12
    + "</article></body></html>"
)

# Run in a fresh interpreter, so that its peak RSS is this one extraction's and nothing else's.
MEASURE = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")
import django
django.setup()
from fetch.extract import extract
from fetch.targets import TargetOptions

post = (
    "<div class='post' id='p{n}'><h2><a class='title' href='/posts/{n}'>Harbour notes {n}</a></h2>"
    "<p class='body'>The ferry left at dawn and the keeper logged the weather and the tide.</p>"
    "<ul class='tags'><li><a href='/tags/harbour'>harbour</a></li>"
    "<li><a href='/tags/weather'>weather</a></li></ul></div>\\n"
)
parts = ["<!DOCTYPE html><html lang='en'><head><title>Big page</title></head><body><main>"]
size, n = len(parts[0]), 0
while size < 20 << 20:
    parts.append(post.format(n=n))
    size += len(parts[-1])
    n += 1
    if n == 40_000:
        parts.append("<p>The keeper's log ends here.</p>")
parts.append("</main></body></html>")
body = "".join(parts).encode()
del parts
result = extract(body, declared_type="text/html", charset=None, url="https://bench.example/",
                 options=TargetOptions(grep="log ends"))
print(json.dumps({
    "bytes": len(body),
    "content": result.content,
    "title": result.title,
    # VmHWM belongs to this interpreter's own memory; ru_maxrss would keep the peak of the
    # forked copy of pytest it replaced, hundreds of MB after a whole suite.
    "peak_kib": next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")),
    "trafilatura_loaded": "trafilatura" in sys.modules or "lxml.html" in sys.modules,
}))
"""


def test_a_20_mib_page_never_grows_the_extracting_process_past_300_mb() -> None:
    finished = subprocess.run(
        [sys.executable, "-c", MEASURE], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    figures = json.loads(finished.stdout.splitlines()[-1])

    assert figures["bytes"] >= 20 << 20
    assert figures["title"] == "Big page"
    assert figures["content"].endswith(": The keeper's log ends here.")
    assert figures["trafilatura_loaded"] is False  # the page was parsed in a child
    assert figures["peak_kib"] * 1024 < PEAK_LIMIT_BYTES, figures["peak_kib"]


def many_paragraphs(count: int) -> str:
    """Just under the element count where the whole page is flattened: trafilatura's slowest."""
    paragraphs = "".join(
        f"<p>Paragraph {n} about the harbour, the ferry and the tide.</p>" for n in range(count)
    )
    return f"<html><body><article>{paragraphs}</article></body></html>"


@pytest.fixture
def small_sandbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    """This process's sandbox, with one child limited to 160 MiB of address space."""
    pool = Sandbox(children=1, memory_bytes=160 << 20)
    monkeypatch.setattr(sandbox_module, "_instance", pool)
    yield pool
    pool.close()


def html(body: str) -> str:
    return extract(
        body.encode(),
        declared_type="text/html",
        charset=None,
        url=URL,
        options=TargetOptions(grep="Tides|harbour"),
    ).content


def test_a_page_that_outruns_the_childs_cpu_budget_ends_filter_timeout_and_the_next_page_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(extract_module, "HTML_CPU_SECONDS", 0.2)
    monkeypatch.setattr(extract_module, "HTML_CPU_SECONDS_PER_MIB", 0.0)

    with pytest.raises(FetchError) as caught:
        html(many_paragraphs(45_000))

    assert caught.value.outcome == "filter_timeout"
    assert caught.value.http_status == 422
    assert caught.value.message.startswith("the HTML extractor ")
    assert caught.value.hint == HTML_TIME_HINT
    monkeypatch.undo()
    assert "1: # Tides" in html(ARTICLE)


def test_a_page_that_exhausts_the_childs_memory_ends_memory_limit_and_the_next_page_is_read(
    small_sandbox: Sandbox,
) -> None:
    huge = "<html><body>" + "<div><p>The harbour at night.</p></div>" * 600_000 + "</body></html>"

    with pytest.raises(FetchError) as caught:
        html(huge)

    assert caught.value.outcome == "memory_limit"
    assert caught.value.http_status == 422
    assert caught.value.message == "the HTML extractor ran out of memory"
    assert caught.value.hint == HTML_MEMORY_HINT
    assert "1: # Tides" in html(ARTICLE)


# Each too big for a child of 160 MiB, each in its own way: lxml's tree of an 11 MB page (libxml2
# reports the failed allocation), a jq array of a billion numbers (jq aborts), a page whose
# content stream inflates to 300 MB of text (PDFium aborts).
HUGE_PAGE = "<html><body>" + "<div><p>The harbour at night.</p></div>" * 300_000 + "</body></html>"
JQ_HOG = "[range(1e9)] | length"
PDF_BOMB = build_pdf_from_streams([flate_bomb_stream(300_000_000)], raw=True)
BY_ABORT = "ran out of memory (ended by SIGABRT)"


@pytest.fixture
def upstream(httpserver, settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    httpserver.expect_request("/huge").respond_with_data(HUGE_PAGE, content_type="text/html")
    httpserver.expect_request("/data").respond_with_json({"items": [1, 2, 3]})
    httpserver.expect_request("/bomb.pdf").respond_with_data(PDF_BOMB, content_type="application/pdf")
    return httpserver


@pytest.mark.parametrize(
    ("path", "options", "message", "hint"),
    [
        ("/huge", {}, "the HTML extractor ran out of memory", HTML_MEMORY_HINT),
        ("/data", {"jq": JQ_HOG}, f"the jq program {BY_ABORT}", json_text.MEMORY_HINT),
        ("/bomb.pdf", {}, f"the PDF reader {BY_ABORT}", pdf_text.MEMORY_HINT),
    ],
    ids=["html", "jq", "pdf"],
)
def test_fetch_answers_422_memory_limit_for_a_document_too_big_for_its_child(
    agent, upstream, small_sandbox: Sandbox, path: str, options: dict[str, str], message: str, hint: str
) -> None:
    _, client = agent

    response = client.post("/v1/fetch", {"url": upstream.url_for(path), "options": options})
    after = client.post("/v1/fetch", {"url": upstream.url_for("/data"), "options": {"jq": ".items[1]"}})

    assert response.status_code == 422, response.content
    assert (response.json()["code"], response.json()["error"], response.json()["hint"]) == (
        "memory_limit",
        message,
        hint,
    )
    assert (after.status_code, after.json()["content"]) == (200, "2")


def test_fetch_answers_422_filter_timeout_for_a_jq_program_that_runs_out_of_time(
    agent, upstream, small_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, client = agent
    monkeypatch.setattr(json_text, "JQ_CPU_SECONDS", 0.5)

    response = client.post("/v1/fetch", {"url": upstream.url_for("/data"), "options": {"jq": "def f: f; f"}})

    assert response.status_code == 422, response.content
    assert response.json()["code"] == "filter_timeout"
    assert response.json()["hint"] == json_text.TIME_HINT


def test_a_batch_target_stores_memory_limit_and_a_slow_one_filter_timeout(
    agent, upstream, small_sandbox: Sandbox, settings
) -> None:
    caller, _ = agent
    settings.SIFT_BATCH_WORKERS = 1
    url = upstream.url_for("/data")
    job = jobs.submit(
        caller,
        validate_targets(
            [
                {"url": url, "options": {"jq": JQ_HOG}},
                {"url": url, "options": {"jq": "def f: f; f"}},
                {"url": url, "options": {"jq": ".items[0]"}},
            ]
        ),
    ).job

    assert worker.drain(pipeline_bridge.fetch_target, budget=60) == 3

    job.refresh_from_db()
    hog, slow, fine = job.targets.order_by("idx")
    assert (hog.status, hog.outcome, hog.hint, hog.result) == (
        "failed",
        "memory_limit",
        json_text.MEMORY_HINT,
        None,
    )
    assert (slow.status, slow.outcome) == ("failed", "filter_timeout")
    assert (fine.status, fine.result["content"]) == ("done", "1")
    assert (job.status, job.targets_failed) == ("partial", 2)


def test_html_text_over_the_limit_is_too_long_without_shipping_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(extract_module, "READABLE_CHARS", 100)

    with pytest.raises(FetchError) as caught:
        extract(ARTICLE.encode(), declared_type="text/html", charset=None, url=URL, options=TargetOptions())

    assert caught.value.outcome == "too_long"
    assert "over the limit of 100" in caught.value.message


def test_html_text_over_the_narrowing_budget_is_too_long_with_the_hint_to_grep_the_raw_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(extract_module, "READABLE_CHARS", 200)

    with pytest.raises(FetchError) as caught:
        html(ARTICLE)

    assert caught.value.outcome == "too_long"
    assert 'mode "raw"' in caught.value.hint
    raw = extract(
        ARTICLE.encode(),
        declared_type="text/html",
        charset=None,
        url=URL,
        options=TargetOptions(mode="raw", grep="<h1>"),
    )
    assert raw.matches == 1
