"""Long documents in slices, cursors and citable offsets (docs/api.md, "Slices and offsets"),
through ``/v1/fetch`` GET and POST and the batch ``FetchFunc``, against pages served on loopback."""

from __future__ import annotations

import hashlib
import random
import re

import pytest
from werkzeug import Response

from batch.engine.seam import Caller
from batch.pipeline_bridge import fetch_target
from fetch.models import CachedDocument
from fetch.targets import parse_target

from .factories import LOOPBACK
from .fixtures.pdf_writer import build_pdf
from .upstream import ARTICLE

PARAGRAPH_END = re.compile(r"\n\n(?!\n)")
HEADING_START = re.compile(r"\n(?=# )")


@pytest.fixture
def open_loopback(settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_CACHE_TTL = 900


def _words(rng: random.Random, count: int) -> str:
    return " ".join("".join(rng.choices("abcdefghij", k=rng.randint(1, 9))) for _ in range(count))


def long_document() -> str:
    """About 2 MB of Markdown-like text: headings and paragraphs, a run of lines with no blank
    line between them (longer than a slice), and one line longer than a slice."""
    rng = random.Random(22)
    parts: list[str] = []
    while sum(map(len, parts)) < 1_600_000:
        parts.append(f"# Section {len(parts)}" if rng.random() < 0.1 else _words(rng, rng.randint(5, 400)))
    lines = "\n".join(_words(rng, rng.randint(3, 30)) for _ in range(2_500))
    one_line = _words(rng, 30_000)
    return "\n\n".join([*parts[:200], lines, one_line, *parts[200:]]) + "\n"


def _boundaries(text: str, start: int, limit: int) -> tuple[list[int], list[int], list[int]]:
    """Every place a slice from ``start`` may end within ``limit``: after a blank line or before a
    heading, after a line end, after a space."""
    window = text[start : start + limit]
    blocks = [start + m.end() for m in PARAGRAPH_END.finditer(window)]
    blocks += [m.end() for m in HEADING_START.finditer(text, start, start + limit + 1)]
    lines = [start + i + 1 for i, c in enumerate(window) if c == "\n"]
    spaces = [start + i + 1 for i, c in enumerate(window) if c == " "]
    return blocks, lines, spaces


def test_a_2_mb_document_is_read_slice_by_slice_to_the_end_each_cut_at_the_last_boundary(
    agent, httpserver, open_loopback
):
    _, client = agent
    text = long_document()
    assert len(text.encode()) > 2_000_000
    httpserver.expect_request("/long.txt").respond_with_data(text, content_type="text/plain; charset=utf-8")
    url, limit = httpserver.url_for("/long.txt"), 100_000
    slices: list[str] = []
    cursor: str | None = None
    kinds: set[str] = set()
    while True:
        options = {"max_chars": limit, "cursor": cursor}
        if len(slices) % 2:  # GET and POST take turns: a cursor of one door is good at the other
            response = client.post("/v1/fetch", {"url": url, "options": options})
        else:
            response = client.get("/v1/fetch", url=url, **{k: v for k, v in options.items() if v is not None})
        assert response.status_code == 200, response.content
        body = response.json()
        assert (body["total_chars"], body["content_sha256"]) == (
            len(text),
            hashlib.sha256(text.encode()).hexdigest(),
        )
        assert body["chars"] == len(body["content"]) <= limit
        start = sum(len(piece) for piece in slices)
        assert text.startswith(body["content"], start)
        slices.append(body["content"])
        if "next_cursor" not in body:
            break
        end = start + body["chars"]
        assert text[end - 1].isspace(), f"a cut inside a word at {end}"
        blocks, lines, spaces = _boundaries(text, start, limit)
        kinds.add("block" if blocks else "line" if lines else "space")
        assert end == max(blocks or lines or spaces)
        cursor = body["next_cursor"]
        if len(slices) == 5:
            CachedDocument.objects.all().delete()  # the copy evicted: fetched again, same version
    assert "".join(slices) == text
    assert len(slices) > len(text) // limit
    assert kinds == {"block", "line", "space"}


def test_a_slice_ends_before_a_heading_or_after_a_paragraph_whichever_comes_last() -> None:
    from fetch.answer.slices import slice_end

    text = "intro words here\n\n# Heading\nbody line one\nbody line two\n\ntail"
    assert slice_end(text, 0, 30) == text.index("# Heading")
    assert slice_end(text, 0, 58) == text.index("tail")
    assert slice_end(text, 0, len(text)) == len(text)
    assert slice_end("x" * 50, 0, 20) == 20  # no space at all: cut at the limit
    assert slice_end("alpha beta gamma", 0, 12) == len("alpha beta ")
    assert slice_end("words\n\nmore words\n# Next", 0, 18) == len(
        "words\n\nmore words\n"
    )  # a heading at the limit


def test_the_last_slice_carries_no_cursor_and_a_short_document_is_one_slice(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/short.txt").respond_with_data("just a few words", content_type="text/plain")
    body = client.get("/v1/fetch", url=httpserver.url_for("/short.txt")).json()
    assert (body["content"], body["total_chars"]) == ("just a few words", 16)
    assert "next_cursor" not in body
    assert body["content_sha256"] == hashlib.sha256(b"just a few words").hexdigest()


def _first_slice(client, url: str, **options) -> dict:
    response = client.post("/v1/fetch", {"url": url, "options": {"max_chars": 40, **options}})
    assert response.status_code == 200, response.content
    return response.json()


PARAGRAPHS = "\n\n".join(f"paragraph {n} has a few words in it" for n in range(20))


def test_a_tampered_cursor_is_400_before_any_request(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/doc.txt").respond_with_data(PARAGRAPHS, content_type="text/plain")
    url = httpserver.url_for("/doc.txt")
    cursor = _first_slice(client, url)["next_cursor"]
    asked = len(httpserver.log)
    for tampered in (cursor[:-1] + ("A" if cursor[-1] != "A" else "B"), "x" + cursor, "not-a-cursor"):
        response = client.post("/v1/fetch", {"url": url, "options": {"cursor": tampered}})
        assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
        assert "without cursor" in response.json()["hint"]
    assert len(httpserver.log) == asked


def test_another_callers_cursor_and_a_cursor_for_another_url_or_mode_are_refused(
    agent, make_caller, httpserver, open_loopback
):
    _, client = agent
    _, other = make_caller("other")
    httpserver.expect_request("/doc.txt").respond_with_data(PARAGRAPHS, content_type="text/plain")
    httpserver.expect_request("/copy.txt").respond_with_data(PARAGRAPHS, content_type="text/plain")
    url = httpserver.url_for("/doc.txt")
    cursor = _first_slice(client, url)["next_cursor"]
    refusals = [
        other.post("/v1/fetch", {"url": url, "options": {"cursor": cursor}}),
        client.post("/v1/fetch", {"url": httpserver.url_for("/copy.txt"), "options": {"cursor": cursor}}),
        client.post("/v1/fetch", {"url": url, "options": {"cursor": cursor, "mode": "raw"}}),
    ]
    for response in refusals:
        assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
        assert "another caller, URL or options" in response.json()["error"]
    second = client.post("/v1/fetch", {"url": url, "options": {"cursor": cursor, "max_chars": 40}})
    assert second.status_code == 200
    assert second.json()["content"].startswith("paragraph 1 ")


def test_a_document_that_changed_under_a_cursor_is_409_document_changed(agent, httpserver, open_loopback):
    _, client = agent
    served = [PARAGRAPHS, PARAGRAPHS.replace("paragraph 7", "chapter 7")]
    httpserver.expect_request("/doc.txt").respond_with_handler(
        lambda request: Response(served[0], content_type="text/plain")
    )
    url = httpserver.url_for("/doc.txt")
    first = _first_slice(client, url)
    served.pop(0)
    CachedDocument.objects.all().delete()
    response = client.post("/v1/fetch", {"url": url, "options": {"cursor": first["next_cursor"]}})
    assert (response.status_code, response.json()["code"]) == (409, "document_changed")
    assert "without cursor" in response.json()["hint"]
    by_version = client.get("/v1/fetch", url=url, offset=0, version=first["content_sha256"])
    assert (by_version.status_code, by_version.json()["code"]) == (409, "document_changed")


def test_grep_spans_round_trip_through_offset_and_version(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/tides").respond_with_data(ARTICLE, content_type="text/html")
    url = httpserver.url_for("/tides")
    whole = client.get("/v1/fetch", url=url).json()
    grepped = client.get("/v1/fetch", url=url, grep="[Tt]ides? [a-z]+").json()
    assert grepped["matches"] == len(grepped["spans"]) >= 3
    assert grepped["content_sha256"] == whole["content_sha256"]
    for span in grepped["spans"]:
        quoted = whole["content"][span["start"] : span["end"]]
        assert re.fullmatch("[Tt]ides? [a-z]+", quoted)
        back = client.get(
            "/v1/fetch",
            url=url,
            offset=span["start"],
            version=grepped["content_sha256"],
            max_chars=span["end"] - span["start"],
        ).json()
        assert back["content"] == quoted
        assert back["next_cursor"]
    rest = client.post(
        "/v1/fetch",
        {"url": url, "options": {"offset": grepped["spans"][0]["start"], "version": whole["content_sha256"]}},
    ).json()
    assert whole["content"].endswith(rest["content"])
    assert rest["content"].startswith("Tide")


def test_question_spans_mark_each_kept_passage_in_the_whole_text(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/tides").respond_with_data(ARTICLE, content_type="text/html")
    url = httpserver.url_for("/tides")
    whole = client.get("/v1/fetch", url=url).json()["content"]
    answered = client.get("/v1/fetch", url=url, question="When do neap tides happen?", context=False).json()
    assert len(answered["spans"]) == len(answered["passages"]) >= 1
    for span in answered["spans"]:
        assert whole[span["start"] : span["end"]] in answered["content"]
    assert any("Neap" in whole[s["start"] : s["end"]] for s in answered["spans"])


def test_spans_of_a_pdf_name_the_page_of_each_match(agent, httpserver, open_loopback):
    _, client = agent
    pdf = build_pdf([[f"This is page {n}.", "Nothing else here."] for n in range(1, 5)])
    httpserver.expect_request("/doc.pdf").respond_with_data(pdf, content_type="application/pdf")
    url = httpserver.url_for("/doc.pdf")
    body = client.get("/v1/fetch", url=url, grep="page [24]").json()
    assert [span["page"] for span in body["spans"]] == [2, 4]
    whole = client.get("/v1/fetch", url=url).json()["content"]
    assert [whole[s["start"] : s["end"]] for s in body["spans"]] == ["page 2", "page 4"]


@pytest.mark.parametrize(
    ("options", "field", "error"),
    [
        (
            {"cursor": "abc", "offset": 0, "version": "0" * 64},
            "cursor",
            "cannot be sent with offset or version",
        ),
        ({"offset": 5}, "offset", "offset needs version"),
        ({"offset": 5, "version": "0" * 64, "grep": "x"}, "grep", "offset reads the whole text"),
        ({"version": "not-a-sha"}, "version", "version does not match"),
        ({"max_chars": 0}, "max_chars", "max_chars must be a whole number from 1 to 1000"),
        ({"max_chars": 1001}, "max_chars", "max_chars must be a whole number from 1 to 1000"),
        ({"max_chars": "10"}, "max_chars", "max_chars must be a whole number from 1 to 1000"),
    ],
)
def test_options_that_make_no_sense_together_or_out_of_range_are_400_with_a_hint(
    agent, settings, options, field, error
):
    settings.SIFT_FETCH_MAX_CHARS = 1000
    _, client = agent
    response = client.post("/v1/fetch", {"url": "https://example.org/", "options": options})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
    assert response.json()["details"][0]["field"] == f"options.{field}"
    assert error in response.json()["error"]
    assert response.json()["hint"]


def test_an_offset_past_the_end_is_400_naming_the_length(agent, httpserver, open_loopback):
    _, client = agent
    httpserver.expect_request("/short.txt").respond_with_data("twelve chars", content_type="text/plain")
    version = hashlib.sha256(b"twelve chars").hexdigest()
    response = client.get("/v1/fetch", url=httpserver.url_for("/short.txt"), offset=13, version=version)
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
    assert "12" in response.json()["hint"]


def test_a_batch_target_carries_the_same_slice_fields_and_its_cursor_goes_on(
    agent, httpserver, open_loopback
):
    caller, client = agent
    httpserver.expect_request("/doc.txt").respond_with_data(PARAGRAPHS, content_type="text/plain")
    url = httpserver.url_for("/doc.txt")
    as_caller = Caller(caller.name, caller.caller_class)
    result = fetch_target(as_caller, parse_target({"url": url, "options": {"max_chars": 40, "grep": "1"}}))
    meta = result["meta"]
    assert meta["content_sha256"] == hashlib.sha256(PARAGRAPHS.encode()).hexdigest()
    assert meta["total_chars"] > meta["chars"] == len(result["content"])
    assert result["content"] == "3: paragraph 1 has a few words in it\n"
    assert meta["matches"] == 11
    assert [PARAGRAPHS[s["start"] : s["end"]] for s in meta["spans"]] == ["1"]
    following = client.post(
        "/v1/fetch", {"url": url, "options": {"max_chars": 40, "grep": "1", "cursor": meta["next_cursor"]}}
    ).json()
    assert following["content"] == "21: paragraph 10 has a few words in it\n"
    assert [PARAGRAPHS[s["start"] : s["end"]] for s in following["spans"]] == ["1"]
    assert following["spans"][0]["start"] == PARAGRAPHS.index("paragraph 10") + len("paragraph ")


def test_query_parameters_that_are_not_integers_are_400_naming_the_parameter(agent):
    _, client = agent
    for name in ("offset", "max_chars"):
        response = client.get("/v1/fetch", url="https://example.org/", version="0" * 64, **{name: "ten"})
        assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
        assert response.json()["details"][0]["field"] == name
        assert "valid integer" in response.json()["details"][0]["message"]
