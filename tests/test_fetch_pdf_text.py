"""PDF text through the sandbox: the same text whether one child reads a document or several share it."""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pypdfium2 as pdfium
import pytest

from fetch.documents import pdf_text as pdf_text_module
from fetch.documents.pdf_text import PdfText, pdf_text
from fetch.errors import FetchError
from fetch.sandbox.child import pdf_share
from fetch.sandbox.child import pdf_text as child_pdf_text
from fetch.sandbox.pool import Sandbox
from fetch.targets import PageRange
from tests.fixtures.pdf_writer import build_pdf, build_pdf_from_streams, flate_bomb_stream, page_stream

LIMITS: dict[str, Any] = {
    "cpu_seconds": 20,
    "wall_seconds": 60,
    "subject": "the PDF reader",
    "hint": "Ask for fewer pages.",
    "max_reply_bytes": 1 << 24,
}


def words_pdf(pages: int) -> bytes:
    """``pages`` pages of 46 lines of pseudo-words, uncompressed: over 64 KiB from 20 pages on."""
    rng = random.Random(pages)
    syllables = ["ka", "lo", "mi", "ne", "sor", "ta", "vel", "ur", "pe", "qua"]

    def line() -> str:
        return " ".join("".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(12))

    return build_pdf([[line() for _ in range(46)] for _ in range(pages)])


@pytest.fixture(scope="module")
def pair() -> Iterator[Sandbox]:
    pool = Sandbox(children=2)
    pool.warm_up()
    yield pool
    pool.close()


@pytest.fixture
def single() -> Iterator[Sandbox]:
    pool = Sandbox(children=1)
    yield pool
    pool.close()


def read_with(
    pool: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    body: bytes,
    ranges: tuple[PageRange, ...] | None = None,
    max_chars: int = 10_000_000,
) -> PdfText:
    with monkeypatch.context() as patch:
        patch.setattr(pdf_text_module, "get_sandbox", lambda: pool)
        return pdf_text(body, ranges, max_chars=max_chars)


def test_a_big_pdf_is_shared_out_in_runs_of_pages_between_the_idle_children(pair: Sandbox) -> None:
    replies = pair.run_shared(
        "pdf", {"ranges": None, "max_chars": 10_000_000}, words_pdf(40), max_children=2, **LIMITS
    )

    assert [reply["pages"] for reply, _ in replies] == [list(range(1, 21)), list(range(21, 41))]
    assert replies[0][1].startswith(b"## Page 1\n\n")
    assert replies[1][1].startswith(b"## Page 21\n\n")


@pytest.mark.parametrize("ranges", [None, ((4, None), (1, 1), (4, 4)), ((2, 30),), ((7, 7),)])
def test_a_shared_reading_gives_the_text_and_pages_one_child_gives(
    pair: Sandbox, single: Sandbox, monkeypatch: pytest.MonkeyPatch, ranges: tuple[PageRange, ...] | None
) -> None:
    body = words_pdf(40)
    assert len(body) >= pdf_text_module.PDF_SHARED_MIN_BYTES

    shared = read_with(pair, monkeypatch, body, ranges)
    alone = read_with(single, monkeypatch, body, ranges)

    assert shared == alone
    assert shared.content.count("## Page ") == len(shared.pages)


def test_text_over_the_limit_only_once_the_parts_are_added_up_is_too_long(
    pair: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = words_pdf(40)
    # The budget counts each page's text plus two characters: the joined text plus two.
    exact = len(read_with(pair, monkeypatch, body).content) + 2

    assert read_with(pair, monkeypatch, body, max_chars=exact).pages_total == 40
    with pytest.raises(FetchError) as caught:
        read_with(pair, monkeypatch, body, max_chars=exact - 1)
    assert caught.value.outcome == "too_long"


def test_a_page_range_past_the_end_is_refused_the_same_when_shared(
    pair: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(FetchError) as caught:
        read_with(pair, monkeypatch, words_pdf(40), ((30, 41),))

    assert caught.value.outcome == "invalid_request"
    assert "has 40 pages" in caught.value.message


def test_a_reading_starts_the_children_the_pool_has_room_for_and_never_waits_for_a_busy_one() -> None:
    pool = Sandbox(children=2)
    try:
        replies = pool.run_shared(
            "pdf", {"ranges": None, "max_chars": 10_000_000}, words_pdf(40), max_children=2, **LIMITS
        )
        assert [reply["pages"] for reply, _ in replies] == [list(range(1, 21)), list(range(21, 41))]
        assert len(pool.pids()) == 2  # children start on demand: the second one for this reading

        busy = pool._acquire(time.monotonic() + 5)  # one child serves another request meanwhile
        try:
            replies = pool.run_shared(
                "pdf", {"ranges": None, "max_chars": 10_000_000}, words_pdf(40), max_children=2, **LIMITS
            )
        finally:
            pool._release(busy, reusable=True)
        assert [reply["pages"] for reply, _ in replies] == [list(range(1, 41))]
        assert len(pool.pids()) == 2
    finally:
        pool.close()


def test_a_page_that_kills_its_child_fails_the_reading_and_only_that_child_is_replaced() -> None:
    pair = Sandbox(children=2)
    pair.warm_up()
    # Pages 1-5 go to the first child, 6-9 to the second; page 9 inflates to 300 MB of text.
    streams = [zlib.compress(page_stream([f"Text of page {n}."])) for n in range(1, 9)]
    bomb = build_pdf_from_streams([*streams, flate_bomb_stream(300_000_000)], raw=True)
    before = pair.pids()
    try:
        with pytest.raises(FetchError) as caught:
            pair.run_shared("pdf", {"ranges": None, "max_chars": 10_000_000}, bomb, max_children=2, **LIMITS)

        assert caught.value.outcome == "memory_limit"
        assert "ran out of memory" in caught.value.message
        after = pair.pids()
        assert len(after) == 1
        assert after[0] in before
        replies = pair.run_shared(
            "pdf", {"ranges": [[1, 2]], "max_chars": 1000}, bomb, max_children=2, **LIMITS
        )
        # The lost child's place is filled again; two pages go to the first part alone.
        assert [reply["pages"] for reply, _ in replies] == [[1, 2], []]
    finally:
        pair.close()


def test_pages_are_shared_in_equal_runs_and_a_short_document_goes_to_the_first_part() -> None:
    nine = list(range(1, 10))

    assert [pdf_share(nine, [index, 2]) for index in range(2)] == [[1, 2, 3, 4, 5], [6, 7, 8, 9]]
    assert [pdf_share(nine, [index, 3]) for index in range(3)] == [[1, 2, 3, 4], [5, 6, 7, 8], [9]]
    assert [pdf_share([2, 5, 7], [index, 2]) for index in range(2)] == [[2, 5, 7], []]
    assert pdf_share(nine, None) == nine


def test_the_child_reads_each_page_as_pypdfium2s_text_range_does() -> None:
    pages = [["First line.", "Second\tline, (with) \\ escapes."], [], ["  spaced   words  "], ["Last."]]
    body = build_pdf(pages)
    document = pdfium.PdfDocument(body)
    expected = []
    for number in range(1, len(pages) + 1):
        text = document[number - 1].get_textpage().get_text_range()
        expected.append(f"## Page {number}\n\n{text.replace(chr(13) + chr(10), chr(10)).strip()}".rstrip())
    document.close()

    reply, text = child_pdf_text({"ranges": None, "max_chars": 10_000}, body)

    assert text == "\n\n".join(expected)
    assert reply["pages"] == [1, 2, 3, 4]
    assert "## Page 2\n\n## Page 3" in text
