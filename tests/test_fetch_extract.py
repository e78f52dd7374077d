"""Turning downloaded bytes into agent-ready text, end to end through ``extract``."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fetch.documents import pdf_text
from fetch.documents.sniff import clean_text, decode_text, utf8_text
from fetch.errors import FetchError
from fetch.extract import Extracted, extract
from fetch.sandbox.pool import get_sandbox
from fetch.targets import TargetOptions
from tests.fixtures.pdf_writer import build_pdf, build_pdf_from_streams, flate_bomb_stream

URL = "https://news.example/2024/lighthouse"

PARAGRAPHS = [
    "The old lighthouse on the northern cape reopened to visitors this spring after a restoration "
    "that took three years and cost the town more than two million euros.",
    "Engineers replaced the corroded iron lantern room, rebuilt the spiral staircase and installed "
    "a modern LED light that can be seen twenty-two nautical miles out to sea.",
    "The keeper's cottage now houses a small museum about the families who tended the light "
    "between 1867 and 1974, when the station was finally automated.",
    "Local guides say bookings for the summer are already higher than in any year before the "
    "closure, and the ferry company has added two extra crossings a day.",
]
ARTICLE_HTML = f"""<!DOCTYPE html>
<html lang="en-GB">
<head>
  <meta charset="utf-8">
  <title>Lighthouse reopens | Coastal News</title>
  <meta property="og:title" content="Lighthouse reopens after restoration">
  <link rel="canonical" href="/2024/lighthouse-reopens">
  <script>window.tracking = "NAVIGATION SCRIPT";</script>
</head>
<body>
  <header><nav><ul>
    <li><a href="/">Home page link</a></li><li><a href="/world">World section link</a></li>
    <li><a href="/sport">Sport section link</a></li><li><a href="/login">Subscriber login link</a></li>
  </ul></nav></header>
  <main><article>
    <h1>Lighthouse reopens after restoration</h1>
    <h2>Three years of work</h2>
    {"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}
  </article></main>
  <aside><h3>Most read</h3><ul><li><a href="/a">Celebrity chef opens bistro</a></li></ul></aside>
  <footer><p>Copyright Coastal News. Cookie settings. Privacy policy.</p></footer>
</body>
</html>"""


def run(body: bytes | str, declared_type: str = "text/html", **options: Any) -> Extracted:
    raw = body.encode() if isinstance(body, str) else body
    return extract(raw, declared_type=declared_type, charset=None, url=URL, options=TargetOptions(**options))


def refused(body: bytes | str, declared_type: str = "text/html", **options: Any) -> FetchError:
    with pytest.raises(FetchError) as caught:
        run(body, declared_type, **options)
    return caught.value


def five_page_pdf() -> bytes:
    return build_pdf([[f"Text of page {n}.", f"Second line of page {n}."] for n in range(1, 6)])


def sandbox_still_answers() -> bool:
    reply, _ = get_sandbox().run(
        "ping", {}, b"", cpu_seconds=5, wall_seconds=10, subject="ping", hint="", max_reply_bytes=1024
    )
    return bool(reply["pid"])


# --- HTML ----------------------------------------------------------------------------------


def test_html_article_returns_its_body_and_not_its_navigation() -> None:
    result = run(ARTICLE_HTML)

    assert result.kind == "html"
    for paragraph in PARAGRAPHS:
        assert paragraph in result.content
    for chrome in (
        "Home page link",
        "Subscriber login link",
        "Celebrity chef",
        "Cookie settings",
        "NAVIGATION SCRIPT",
    ):
        assert chrome not in result.content


def test_html_meta_carries_title_language_and_canonical_url() -> None:
    result = run(ARTICLE_HTML)

    assert result.meta() == {
        "title": "Lighthouse reopens after restoration",
        "lang": "en-GB",
        "canonical_url": "https://news.example/2024/lighthouse-reopens",
        "hidden_chars": 0,
        # The same, in order of trust: og:title before <title> (tests/test_page_facts.py).
        "metadata": {
            "title": "Lighthouse reopens after restoration",
            "language": "en-GB",
            "canonical_url": "https://news.example/2024/lighthouse-reopens",
        },
    }


def test_html_without_a_title_element_takes_its_title_from_the_first_heading() -> None:
    page = ARTICLE_HTML.replace("<title>Lighthouse reopens | Coastal News</title>", "").replace(
        "og:title", "x"
    )

    assert run(page).title == "Lighthouse reopens after restoration"


def test_markdown_mode_marks_up_headings_and_text_mode_does_not() -> None:
    assert "## Three years of work" in run(ARTICLE_HTML).content
    text = run(ARTICLE_HTML, mode="text").content
    assert "Three years of work" in text
    assert "#" not in text


def test_html_whose_main_content_is_a_scrap_of_the_page_falls_back_to_the_whole_page() -> None:
    page = (
        "<html><body><div class='notice'>We use cookies</div>"
        "<footer><h2>Contact</h2><ul><li>Harbour office: 555 0101</li>"
        "<li>Ferry desk: 555 0102</li><li>Lighthouse museum: 555 0103</li></ul></footer></body></html>"
    )

    result = run(page)

    assert result.content == (
        "We use cookies\n\n## Contact\n\n- Harbour office: 555 0101\n\n- Ferry desk: 555 0102"
        "\n\n- Lighthouse museum: 555 0103"
    )


def test_html_with_no_text_at_all_is_an_empty_success() -> None:
    assert run("<html><body><div id='app'></div></body></html>").content == ""


def test_raw_mode_returns_the_html_as_served() -> None:
    result = run(ARTICLE_HTML, mode="raw")

    assert result.content == ARTICLE_HTML
    assert result.kind == "html"


def test_html_without_a_declared_type_is_sniffed_as_html() -> None:
    result = run(ARTICLE_HTML, declared_type="")

    assert result.kind == "html"
    assert PARAGRAPHS[0] in result.content


def test_html_declared_text_plain_is_served_as_the_text_it_is() -> None:
    result = run(ARTICLE_HTML, declared_type="text/plain")

    assert result.kind == "text"
    assert result.content == ARTICLE_HTML


# --- PDF -----------------------------------------------------------------------------------


def test_pdf_pages_2_3_of_5_returns_exactly_those_pages() -> None:
    result = run(five_page_pdf(), "application/pdf", pages="2-3")

    assert result.content == (
        "## Page 2\n\nText of page 2.\nSecond line of page 2.\n\n"
        "## Page 3\n\nText of page 3.\nSecond line of page 3."
    )
    assert (result.kind, result.pages_total, result.pages) == ("pdf", 5, [2, 3])
    assert result.meta() == {"title": None, "pages_total": 5, "pages": [2, 3]}


def test_pdf_without_pages_returns_every_page_headed() -> None:
    result = run(five_page_pdf(), "application/pdf")

    assert [line for line in result.content.splitlines() if line.startswith("## ")] == [
        f"## Page {n}" for n in range(1, 6)
    ]
    assert result.pages == [1, 2, 3, 4, 5]


def test_pdf_open_ended_range_and_repeated_pages_give_each_page_once_in_order() -> None:
    result = run(five_page_pdf(), "application/pdf", pages="4-,1,4")

    assert result.pages == [1, 4, 5]


def test_pdf_range_past_the_end_is_invalid_request_naming_the_page_count() -> None:
    error = refused(five_page_pdf(), "application/pdf", pages="3-7")

    assert error.outcome == "invalid_request"
    assert error.http_status == 400
    assert "5 pages" in error.hint


def test_pdf_declared_octet_stream_is_read_as_a_pdf() -> None:
    result = run(five_page_pdf(), "application/octet-stream", pages="1")

    assert result.kind == "pdf"
    assert result.media_type == "application/pdf"
    assert result.content.startswith("## Page 1\n\nText of page 1.")


def test_corrupt_pdf_is_unsupported_and_the_process_carries_on() -> None:
    corrupt = b"%PDF-1.7\n" + bytes(range(256)) * 40

    error = refused(corrupt, "application/pdf")

    assert error.outcome == "unsupported"
    assert error.http_status == 415
    assert "damaged" in error.hint
    assert sandbox_still_answers()


def test_pdf_that_exhausts_memory_is_memory_limit_and_the_process_carries_on() -> None:
    # One page whose content stream inflates to 300 MB of text: PDFium's text page for it does
    # not fit in the child's 1 GiB address space.
    bomb = build_pdf_from_streams([flate_bomb_stream(300_000_000)], raw=True)
    assert len(bomb) < 1 << 20

    error = refused(bomb, "application/pdf")

    assert error.outcome == "memory_limit"
    assert error.http_status == 422
    assert error.message == "the PDF reader ran out of memory (ended by SIGABRT)"
    assert error.hint == pdf_text.MEMORY_HINT
    assert sandbox_still_answers()
    assert run(five_page_pdf(), "application/pdf", pages="5").pages == [5]


def test_pdf_in_raw_mode_is_unsupported() -> None:
    assert refused(five_page_pdf(), "application/pdf", mode="raw").outcome == "unsupported"


def test_pages_on_an_html_page_is_invalid_request() -> None:
    error = refused(ARTICLE_HTML, pages="1")

    assert error.outcome == "invalid_request"
    assert "PDF" in error.message


# --- JSON ----------------------------------------------------------------------------------

DOCUMENT = {"items": [{"name": "alpha", "size": 3}, {"name": "beta", "size": 5}], "total": 2}


def test_json_is_pretty_printed() -> None:
    result = run(json.dumps(DOCUMENT, separators=(",", ":")), "application/json")

    assert result.kind == "json"
    assert result.content == json.dumps(DOCUMENT, indent=2)


def test_json_with_jq_returns_the_filtered_value() -> None:
    result = run(
        json.dumps(DOCUMENT), "application/json; charset=utf-8", jq=".items[] | select(.size > 4) | .name"
    )

    assert result.content == '"beta"'


def test_jq_with_several_outputs_returns_each_on_its_own() -> None:
    result = run(json.dumps(DOCUMENT), "application/json", jq=".items[].size")

    assert result.content == "3\n5"


def test_runaway_jq_program_ends_promptly_with_filter_timeout() -> None:
    started = time.monotonic()

    error = refused(json.dumps(DOCUMENT), "application/json", jq="def f: f; f")

    assert error.outcome == "filter_timeout"
    assert error.http_status == 422
    assert time.monotonic() - started < 15  # generous: the CPU budget is 2 s
    assert run(json.dumps(DOCUMENT), "application/json", jq=".total").content == "2"


def test_jq_that_fails_on_this_document_is_invalid_request_with_jq_message() -> None:
    error = refused(json.dumps(DOCUMENT), "application/json", jq=".items.name")

    assert error.outcome == "invalid_request"
    assert "Cannot index array" in error.message


def test_jq_on_an_html_page_is_invalid_request() -> None:
    assert refused(ARTICLE_HTML, jq=".").outcome == "invalid_request"


def test_jq_on_json_served_as_text_plain_applies() -> None:
    assert run(json.dumps(DOCUMENT), "text/plain", jq=".total").content == "2"


def test_declared_json_that_does_not_parse_is_served_as_text() -> None:
    result = run('callback({"a": 1});', "application/json")

    assert (result.kind, result.content) == ("text", 'callback({"a": 1});')


def test_raw_mode_returns_json_as_served() -> None:
    served = '{"a":1,\n"b":[2]}'

    assert run(served, "application/json", mode="raw").content == served


def test_json_escaped_lone_surrogates_come_out_as_valid_utf8() -> None:
    result = run('{"a": "x\\ud800y\\u0000z"}', "application/json")

    result.content.encode("utf-8")
    assert "\x00" not in result.content


# --- types, charsets, cleaning ------------------------------------------------------------

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
)


def test_an_image_is_unsupported() -> None:
    error = refused(PNG, "image/png")

    assert error.outcome == "unsupported"
    assert error.http_status == 415


def test_image_bytes_declared_text_html_are_not_served_as_text() -> None:
    error = refused(PNG, "text/html; charset=utf-8")

    assert error.outcome == "unsupported"
    assert "PNG" in error.message


def test_damaged_zip_archive_declared_octet_stream_is_unreadable() -> None:
    # A zip archive is read as an office document or a book (tests/test_fetch_documents.py).
    assert refused(
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + b"\x00" * 40, "application/octet-stream"
    ).outcome == ("unreadable")


def test_binary_bytes_declared_text_plain_are_unsupported() -> None:
    assert refused(bytes(range(256)), "text/plain").outcome == "unsupported"


def test_text_plain_is_returned_as_is_with_unix_line_ends() -> None:
    assert run("line one\r\nline two\r\n", "text/plain").content == "line one\nline two\n"


def test_declared_charset_decodes_the_body() -> None:
    result = extract(
        "Café crème".encode("latin-1"),
        declared_type="text/plain",
        charset="ISO-8859-1",
        url=URL,
        options=TargetOptions(),
    )

    assert result.content == "Café crème"


def test_meta_charset_decodes_html_when_none_is_declared() -> None:
    page = '<html><head><meta charset="windows-1251"></head><body><p>Привет, мир</p></body></html>'

    result = run(page.encode("windows-1251"), "text/html", mode="raw")

    assert "Привет, мир" in result.content


def test_a_declared_charset_that_does_not_fit_the_bytes_gives_way_to_the_embedded_one() -> None:
    page = '<html><head><meta charset="windows-1252"></head><body><p>naïve \u2013 café</p></body></html>'

    result = run(page.encode("cp1252"), "text/html; charset=utf-8", mode="raw")

    assert "naïve \u2013 café" in result.content


def test_nul_bytes_and_invalid_utf8_are_cleaned() -> None:
    body = b"x" * 2000 + b"\nbroken \xff\xfe byte and a NUL\x00 here\n"

    result = run(body, "text/plain; charset=utf-8")

    assert "\x00" not in result.content
    assert "broken \ufffd\ufffd byte and a NUL here" in result.content
    result.content.encode("utf-8")


# --- limits and narrowing -----------------------------------------------------------------


def test_text_of_any_length_comes_back_whole_with_its_version_for_slicing() -> None:
    body = b"a line\n" * 100_000

    result = extract(body, declared_type="text/plain", charset=None, url=URL, options=TargetOptions())

    assert result.content == body.decode()
    assert result.content_sha256 == hashlib.sha256(body).hexdigest()


def test_grep_narrows_text_and_keeps_the_version_of_the_whole_text() -> None:
    body = "".join(f"line {n}\n" for n in range(1, 101)).encode()

    result = extract(
        body, declared_type="text/plain", charset=None, url=URL, options=TargetOptions(grep="^line 4[27]$")
    )

    assert result.content == "42: line 42\n47: line 47"
    assert result.matches == 2
    assert result.meta()["matches"] == 2
    assert result.content_sha256 == hashlib.sha256(body).hexdigest()


def test_grep_with_no_match_is_a_success_with_zero_matches() -> None:
    result = run(ARTICLE_HTML, grep="submarine")

    assert (result.content, result.matches) == ("", 0)


def test_grep_over_pdf_pages_numbers_the_extracted_lines() -> None:
    result = run(five_page_pdf(), "application/pdf", pages="2", grep="Second", context=False)

    assert result.content == "4: Second line of page 2."
    assert result.pages == [2]


def test_question_on_an_article_keeps_the_passage_that_answers_it() -> None:
    result = run(ARTICLE_HTML, question="How far out to sea can the new LED light be seen?", context=False)

    assert PARAGRAPHS[1] in result.content
    assert result.passages
    assert max(result.passages, key=lambda p: p["score"])["n"] == 2


def test_a_page_too_big_for_main_content_detection_is_flattened_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The sandbox child runs this same module; in-process, the threshold can be lowered.
    from fetch.html import main_content as module

    monkeypatch.setattr(module, "MAIN_CONTENT_MAX_ELEMENTS", 20)

    result = module.html_text(ARTICLE_HTML, url=URL, markdown=True)

    assert "Subscriber login link" in result.content
    assert "## Three years of work" in result.content
    assert result.title == "Lighthouse reopens after restoration"


def test_a_question_turns_context_on_unless_asked_not_to() -> None:
    with_context = run(ARTICLE_HTML, question="How far out to sea can the new LED light be seen?")
    without = run(ARTICLE_HTML, question="How far out to sea can the new LED light be seen?", context=False)

    assert PARAGRAPHS[0] in with_context.content
    assert PARAGRAPHS[0] not in without.content


def test_text_that_happens_to_start_like_a_file_signature_stays_text() -> None:
    assert run("MZ is the code of the Mozambique metical.\n", "text/plain").content.startswith("MZ is")
    assert run("The ftyp box opens every MP4 file.\n", "").kind == "text"


def test_html_with_a_stray_control_character_is_still_read_as_html() -> None:
    result = run(ARTICLE_HTML.replace("<title>", "<title>\x0b"))

    assert result.kind == "html"
    assert PARAGRAPHS[0] in result.content


def test_trafilatura_is_never_entered_by_two_threads_of_one_process(monkeypatch):
    """gthread workers extract in several threads; trafilatura corrupts memory when run concurrently."""
    import threading
    import time

    import trafilatura

    from fetch.html import main_content as module

    active = 0
    peak = 0
    count_lock = threading.Lock()
    real_extract = trafilatura.extract

    def watched_extract(*args, **kwargs):
        nonlocal active, peak
        with count_lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.02)
        try:
            return real_extract(*args, **kwargs)
        finally:
            with count_lock:
                active -= 1

    monkeypatch.setattr(module.trafilatura, "extract", watched_extract)
    page = "<html><body><article>" + "<p>A paragraph about tides.</p>" * 50 + "</article></body></html>"
    options = {"url": "https://x.test/", "markdown": True}
    threads = [threading.Thread(target=module.html_text, args=(page,), kwargs=options) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak == 1


# Valid and broken UTF-8, BOMs, NUL and line ends, in any order: bytes any charset may get.
_PIECES = [
    b"a",
    b"\xc3\xa9",
    b"\xe4\xb8\xad",
    b"\xf0\x9f\x98\x80",
    b"\x00",
    b"\r",
    b"\n",
    b"\xff",
    b"\xed\xa0\x80",
]
_TRICKY_BYTES = st.lists(
    st.sampled_from([*_PIECES, b"\xef\xbb\xbf", b"\xff\xfe", b'<meta charset="shift_jis">'])  # BOMs, a label
).map(b"".join)


@given(
    st.one_of(_TRICKY_BYTES, st.binary()),
    st.sampled_from([None, "utf-8", "windows-1252", "utf-16le", "bogus"]),
)
def test_the_html_payload_of_a_body_is_its_decoded_text_cleaned_in_utf8(
    body: bytes, charset: str | None
) -> None:
    assert utf8_text(body, charset) == clean_text(decode_text(body, charset)).encode("utf-8", "replace")
