"""``POST /v1/read``: documents uploaded as the body or as a form's one file, read as a fetched
one; and office documents fetched by URL through ``/v1/fetch`` (docs/api.md, "Uploads")."""

from __future__ import annotations

import asyncio
import hashlib
import random
from typing import Any
from urllib.parse import urlencode

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from doors import middleware
from fetch.models import CachedDocument
from tests.fixtures import office_writer as ow

from .factories import LOOPBACK
from .fixtures.pdf_writer import build_pdf

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def send(client: Any, body: bytes, content_type: str = DOCX, **query: Any) -> Any:
    path = "/v1/read" + (f"?{urlencode(query)}" if query else "")
    return client.client.post(path, body, content_type=content_type, headers=client.headers)


def memo() -> bytes:
    body = ow.w_paragraph("Harbour memo", style="Heading1") + "".join(
        ow.w_paragraph(f"Paragraph {n} says the ferry runs at {n} o'clock.") for n in range(1, 40)
    )
    return ow.docx(body, title="Memo")


@pytest.mark.django_db
def test_a_document_sent_as_the_body_is_read_as_markdown(agent):
    _, client = agent
    document = memo()
    response = send(client, document)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["content"].startswith("# Harbour memo\n\nParagraph 1 says")
    assert body["url"] == body["final_url"] == "sha256:" + hashlib.sha256(document).hexdigest()
    assert (body["content_type"], body["title"], body["bytes"], body["cache"]) == (
        DOCX,
        "Memo",
        len(document),
        "miss",
    )
    assert CachedDocument.objects.count() == 0  # nothing uploaded is stored


@pytest.mark.django_db
def test_a_form_with_one_file_is_read_with_its_name_and_options(agent):
    _, client = agent
    table = SimpleUploadedFile("prices.csv", b"item,price\napple,1\npear,2\n", content_type="text/plain")
    response = client.client.post("/v1/read?grep=pear", {"file": table}, headers=client.headers)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["name"], body["content_type"], body["matches"]) == ("prices.csv", "text/csv", 1)
    assert body["content"] == "4: | pear | 2 |"


@pytest.mark.django_db
def test_a_form_must_hold_one_file_named_file(agent):
    _, client = agent
    two = {"file": SimpleUploadedFile("a.txt", b"a"), "other": SimpleUploadedFile("b.txt", b"b")}
    response = client.client.post("/v1/read", two, headers=client.headers)
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")


@pytest.mark.django_db
@pytest.mark.parametrize("option", ["render=true", "max_age=0", "recover=true", "robots=true"])
def test_options_that_need_a_site_are_refused_with_a_hint(agent, option):
    _, client = agent
    response = client.client.post(f"/v1/read?{option}", memo(), content_type=DOCX, headers=client.headers)
    assert response.status_code == 400
    body = response.json()
    name = option.split("=")[0]
    assert body["code"] == "invalid_request"
    assert body["error"].startswith(name)
    assert f"Leave {name} out" in body["hint"]


@pytest.mark.django_db
def test_slices_of_a_long_upload_follow_with_the_file_sent_again(agent):
    _, client = agent
    document = memo()
    first = send(client, document, max_chars=400).json()
    assert "next_cursor" in first
    second = send(client, document, max_chars=400, cursor=first["next_cursor"])
    assert second.status_code == 200, second.content
    assert second.json()["content"].startswith("Paragraph")
    assert second.json()["content_sha256"] == first["content_sha256"]
    other = ow.docx(ow.w_paragraph("Another file altogether"))
    refused = send(client, other, max_chars=400, cursor=first["next_cursor"])
    assert (refused.status_code, refused.json()["code"]) == (400, "invalid_request")


@pytest.mark.django_db
def test_an_upload_over_the_limit_is_too_large(agent, settings):
    settings.SIFT_UPLOAD_MAX_BYTES = 1000
    _, client = agent
    response = send(client, memo())
    assert (response.status_code, response.json()["code"]) == (413, "too_large")


@pytest.mark.django_db
def test_a_hostile_upload_answers_its_outcome(agent):
    _, client = agent
    response = send(client, ow.deflate_bomb(64 << 20))
    assert (response.status_code, response.json()["code"]) == (422, "too_long")
    png = send(client, b"\x89PNG\r\n\x1a\n" + bytes(32))
    assert (png.status_code, png.json()["code"]) == (415, "unsupported")


@pytest.mark.django_db
def test_an_upload_needs_a_key(client):
    response = client.post("/v1/read", memo(), content_type=DOCX)
    assert response.status_code == 401


def _asgi_upload(
    app: Any, body_parts: list[bytes], release: asyncio.Event, key: str = "k", *, endless: bool = False
) -> dict[str, Any]:
    """An upload at the ASGI edge; an ``endless`` one keeps streaming until ``release``."""
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/read",
        "headers": [(b"authorization", f"Bearer {key}".encode())],
    }
    sent: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        if body_parts:
            part = body_parts.pop(0)
            return {"type": "http.request", "body": part, "more_body": bool(body_parts) or endless}
        await release.wait()
        return {"type": "http.disconnect"}

    async def send_message(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            sent["status"] = message["status"]

    return {"scope": scope, "receive": receive, "send": send_message, "sent": sent}


def test_the_edge_refuses_an_upload_while_it_streams_past_the_limit(settings):
    settings.SIFT_UPLOAD_MAX_BYTES = 1000
    reached: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(b"")

    async def run() -> dict[str, Any]:
        call = _asgi_upload(app, [b"x" * 600, b"x" * 600, b"x"], asyncio.Event())
        await middleware.BoundedRequests(app)(call["scope"], call["receive"], call["send"])
        return call["sent"]

    assert asyncio.run(run())["status"] == 413
    assert reached == []


def test_uploads_in_flight_are_bounded_per_caller_at_the_edge(settings):
    settings.SIFT_UPLOADS_PER_CALLER = 2
    settings.SIFT_UPLOADS_TOTAL = 10

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()

    async def run() -> list[Any]:
        release = asyncio.Event()
        # Two uploads whose bodies never end hold the caller's shares; a third is refused at once.
        calls = [_asgi_upload(app, [b"x"], release, endless=True) for _ in range(3)]
        for call in calls:
            call["scope"]["headers"] = [(b"authorization", b"Bearer same")]
        edge = middleware.BoundedRequests(app)
        held = [asyncio.create_task(edge(c["scope"], c["receive"], c["send"])) for c in calls[:2]]
        await asyncio.sleep(0.05)
        await edge(calls[2]["scope"], calls[2]["receive"], calls[2]["send"])
        other = _asgi_upload(app, [b"x"], release, key="another")
        release.set()
        await asyncio.gather(*held)
        await edge(other["scope"], other["receive"], other["send"])
        return [calls[2]["sent"].get("status"), other["sent"].get("status")]

    refused, after = asyncio.run(run())
    assert refused == 429
    assert after is None  # admitted: the app itself sent nothing


@pytest.fixture
def open_loopback(settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK


@pytest.mark.django_db
def test_a_workbook_fetched_by_url_as_octet_stream_answers_its_sheets(agent, httpserver, open_loopback):
    _, client = agent
    book = ow.xlsx([("Prices", [["item", "price"], ["apple", 1]]), ("Stock", [["item"], ["pear"]])])
    httpserver.expect_request("/prices").respond_with_data(book, content_type="application/octet-stream")
    response = client.get("/v1/fetch", url=httpserver.url_for("/prices"), pages="2")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["content_type"], body["pages_total"], body["pages"]) == (XLSX, 2, [2])
    assert body["content"] == "## Stock\n\n| item |\n| --- |\n| pear |"


@pytest.mark.django_db
def test_a_feed_fetched_by_url_lists_its_entries_in_the_envelope(agent, httpserver, open_loopback):
    _, client = agent
    feed = b'<rss version="2.0"><channel><title>T</title><item><title>A</title><link>https://e.example/a</link></item></channel></rss>'
    httpserver.expect_request("/feed").respond_with_data(feed, content_type="application/rss+xml")
    body = client.get("/v1/fetch", url=httpserver.url_for("/feed")).json()
    assert body["entries"] == [{"title": "A", "link": "https://e.example/a", "date": "", "summary": ""}]


@pytest.mark.django_db
def test_html_json_and_pdf_uploads_are_read_as_fetched_ones(agent):
    _, client = agent
    page = b"<html><head><title>Memo</title></head><body><article><h1>Memo</h1><p>The ferry leaves at "
    page += b"nine from the <a href='https://port.example/pier'>north pier</a> every day.</p>"
    page += b"</article></body></html>"
    html = send(client, page, "text/html").json()
    assert html["title"] == "Memo"
    assert "[north pier](https://port.example/pier)" in html["content"]
    data = send(
        client, b'{"ferries": [{"name": "Ida"}, {"name": "Nora"}]}', "application/json", jq=".ferries[].name"
    )
    assert data.json()["content"] == '"Ida"\n"Nora"'
    pdf = send(client, build_pdf([["Page one text"], ["Page two text"]]), "application/pdf", pages="2").json()
    assert (pdf["pages_total"], pdf["pages"]) == (2, [2])
    assert "Page two text" in pdf["content"]


@pytest.mark.django_db
def test_a_form_file_larger_than_a_request_body_is_read(agent):
    _, client = agent
    rows = "".join(f"{n},{hashlib.sha256(str(n).encode()).hexdigest()}\n" for n in range(12000))
    table = SimpleUploadedFile("big.csv", ("n,digest\n" + rows).encode(), content_type="text/csv")
    assert table.size > 512 * 1024
    response = client.client.post("/v1/read?max_chars=2000", {"file": table}, headers=client.headers)
    assert response.status_code == 200, response.content
    assert response.json()["content"].startswith("| n | digest |")
    raw = send(client, ("n,digest\n" + rows).encode(), "text/csv", max_chars=2000)
    assert raw.json()["content_sha256"] == response.json()["content_sha256"]


@pytest.mark.django_db
def test_a_workbook_past_the_readable_text_answers_in_slices_to_where_it_stopped(agent, monkeypatch):
    from fetch import extract

    monkeypatch.setattr(extract, "READABLE_CHARS", 300_000)
    _, client = agent
    words = random.Random(3)
    rows = [[f"row {i}", " ".join(str(words.random()) for _ in range(6))] for i in range(20_000)]
    workbook = ow.xlsx([("Ledger", rows), ("Later", rows[:3])])
    assert len(workbook) > 1_000_000
    first = send(client, workbook, XLSX, max_chars=200_000)
    assert first.status_code == 200, first.content
    assert (first.json()["pages"], first.json()["pages_total"]) == ([1], 2)
    last, slices = first.json(), 1
    while "next_cursor" in last:
        last, slices = (
            send(client, workbook, XLSX, max_chars=200_000, cursor=last["next_cursor"]).json(),
            slices + 1,
        )
    assert slices in (2, 3)
    assert first.json()["total_chars"] == last["total_chars"] <= 300_000
    assert last["content"].endswith('To read the sheets after this one, ask for pages "2-".]')


def _sample(client: Any, name: str) -> float:
    text = client.client.get("/metrics").content.decode()
    values = [line.rsplit(" ", 1)[1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(values[0]) if values else 0.0


@pytest.mark.django_db
def test_uploads_are_counted_in_the_fetch_metrics_as_uploads(agent):
    _, client = agent
    ok = 'sift_fetch_requests_total{outcome="ok",source="upload"}'
    refused = 'sift_fetch_requests_total{outcome="unsupported",source="upload"}'
    seconds = 'sift_fetch_seconds_count{source="upload"}'
    fetched = 'sift_fetch_requests_total{outcome="ok",source="url"}'
    before = {name: _sample(client, name) for name in (ok, refused, seconds, fetched)}
    assert send(client, memo()).status_code == 200
    assert send(client, b"\x89PNG\r\n\x1a\n" + bytes(32)).status_code == 415
    after = {name: _sample(client, name) - before[name] for name in before}
    assert after == {ok: 1, refused: 1, seconds: 2, fetched: 0}
