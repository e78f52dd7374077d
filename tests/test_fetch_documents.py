"""Office documents, books, feeds, CSV and RTF through ``extract`` (so through the sandbox child):
each format's Markdown, pages of the paged ones, detection by content, and every hostile case."""

from __future__ import annotations

import datetime
import random
from typing import Any

import pytest

from fetch.documents import archive
from fetch.documents.formats import read_document
from fetch.errors import FetchError
from fetch.extract import Extracted, extract
from fetch.targets import TargetOptions
from tests.fixtures import office_writer as ow
from tests.fixtures.pdf_writer import build_pdf

URL = "https://files.example/reports/q3"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def read(
    body: bytes, declared: str = "application/octet-stream", url: str = URL, **options: Any
) -> Extracted:
    return extract(body, declared_type=declared, charset=None, url=url, options=TargetOptions(**options))


def refusal(
    body: bytes, declared: str = "application/octet-stream", url: str = URL, **options: Any
) -> FetchError:
    with pytest.raises(FetchError) as caught:
        read(body, declared, url, **options)
    return caught.value


def report_docx() -> bytes:
    body = (
        ow.w_paragraph("Quarterly report", style="Heading1")
        + '<w:p><w:r><w:t xml:space="preserve">Sales grew </w:t></w:r>'
        + ow.w_run("twelve percent", bold=True)
        + '<w:r><w:t xml:space="preserve"> in the </w:t></w:r>'
        + ow.w_run("third", italic=True)
        + '<w:r><w:t xml:space="preserve"> quarter, see </w:t></w:r>'
        + '<w:hyperlink r:id="L1"><w:r><w:t>the figures</w:t></w:r></w:hyperlink></w:p>'
        + ow.w_paragraph("Regions", style="Heading2")
        + ow.w_paragraph("North rose most", num=(1, 0))
        + ow.w_paragraph("South held steady", num=(1, 0))
        + ow.w_paragraph("First step", num=(2, 0))
        + ow.w_table([["Region", "Sales"], ["North", "120"], ["South", "80"]])
    )
    return ow.docx(body, title="Q3 report", links={"L1": "https://files.example/figures"})


def test_a_word_document_keeps_headings_emphasis_links_lists_and_tables() -> None:
    document = read(report_docx(), DOCX)
    assert document.kind == "docx"
    assert document.media_type == DOCX
    assert document.title == "Q3 report"
    assert document.content.split("\n\n") == [
        "# Quarterly report",
        "Sales grew **twelve percent** in the *third* quarter, see [the figures](https://files.example/figures)",
        "## Regions",
        "- North rose most",
        "- South held steady",
        "1. First step",
        "| Region | Sales |\n| --- | --- |\n| North | 120 |\n| South | 80 |",
    ]
    assert document.pages_total is None


def test_text_mode_drops_the_markup_and_keeps_the_words() -> None:
    document = read(report_docx(), DOCX, mode="text")
    assert document.content.startswith("Quarterly report\n\nSales grew twelve percent in the third quarter")
    assert "**" not in document.content
    assert "](" not in document.content


def test_a_workbook_is_a_table_per_sheet_and_pages_choose_sheets() -> None:
    sheets: list[tuple[str, list[list[Any]]]] = [
        (
            "Prices",
            [["Item", "Price", "Since"], ["Apple", 1.5, datetime.date(2024, 3, 1)], ["Pear", None, "n/a"]],
        ),
        ("Stock", [["Item", "Count"], ["Apple", 40]]),
        ("Notes", [["checked"]]),
    ]
    document = read(ow.xlsx(sheets, title="Price list"), XLSX)
    assert (document.kind, document.pages_total, document.pages) == ("xlsx", 3, [1, 2, 3])
    assert (
        "## Prices\n\n| Item | Price | Since |\n| --- | --- | --- |\n"
        "| Apple | 1.5 | 2024-03-01 |\n| Pear |  | n/a |" in document.content
    )
    chosen = read(ow.xlsx(sheets), XLSX, pages="2-")
    assert chosen.pages == [2, 3]
    assert chosen.content.startswith("## Stock")
    assert "Prices" not in chosen.content
    assert read(ow.xlsx([("", [["x"]])]), XLSX).content.startswith("## Sheet 1\n")


def test_slides_keep_their_titles_bullets_and_notes() -> None:
    slides = [("Welcome", ["Agenda", "Goals"], "Greet the room"), ("Results", ["Up 12%"], "")]
    document = read(ow.pptx(slides), PPTX)
    assert document.kind == "pptx"
    assert document.pages_total == 2
    assert document.content.split("\n\n") == [
        "## Slide 1: Welcome",
        "- Agenda",
        "- Goals",
        "### Notes",
        "Greet the room",
        "## Slide 2: Results",
        "- Up 12%",
    ]


def test_pages_past_the_last_slide_name_the_count() -> None:
    error = refusal(ow.pptx([("Only", ["one"], "")]), PPTX, pages="2")
    assert error.outcome == "invalid_request"
    assert "1" in error.hint


def test_pages_of_a_document_without_pages_are_refused() -> None:
    assert refusal(report_docx(), DOCX, pages="1").outcome == "invalid_request"
    assert refusal(b"a,b\n1,2\n", "text/csv", pages="1").outcome == "invalid_request"


def test_opendocument_text_spreadsheet_and_presentation() -> None:
    text = ow.odf(
        "odt",
        '<text:h text:outline-level="1">Minutes</text:h>'
        '<text:p>Agreed to <text:span text:style-name="B">fund</text:span> '
        'the <text:span text:style-name="I">new</text:span> <text:a xlink:href="https://e.example/plan">plan</text:a>.</text:p>'
        '<text:list text:style-name="N"><text:list-item><text:p>Vote</text:p></text:list-item></text:list>'
        "<text:list><text:list-item><text:p>Close</text:p></text:list-item></text:list>",
        title="Minutes",
    )
    odt = read(text, "application/vnd.oasis.opendocument.text")
    assert (odt.kind, odt.title) == ("odt", "Minutes")
    assert odt.content.split("\n\n") == [
        "# Minutes",
        "Agreed to **fund** the *new* [plan](https://e.example/plan).",
        "1. Vote",
        "- Close",
    ]
    sheets = ow.odf(
        "ods", ow.ods_table("Budget", [["Line", "Cost"], ["Rent", "900"]]) + ow.ods_table("Other", [["x"]])
    )
    ods = read(sheets, pages="1")
    assert (ods.kind, ods.pages_total, ods.pages) == ("ods", 2, [1])
    assert ods.content == "## Budget\n\n| Line | Cost |\n| --- | --- |\n| Rent | 900 |"
    odp = read(
        ow.odf("odp", ow.odp_page("Plan", ["Step one"], "Speak slowly") + ow.odp_page("End", ["Thanks"]))
    )
    assert (odp.kind, odp.pages_total) == ("odp", 2)
    assert odp.content.split("\n\n")[:4] == ["## Slide 1: Plan", "- Step one", "### Notes", "Speak slowly"]


def test_a_book_reads_its_chapters_in_spine_order() -> None:
    book = ow.epub(
        [
            "<h1>Arrival</h1><p>The ship came in at <a href='https://e.example/dawn'>dawn</a>.</p>",
            "<h1>Departure</h1><ul><li>bags</li></ul>",
        ],
        title="Voyage",
    )
    document = read(book, "application/epub+zip")
    assert (document.kind, document.title, document.pages_total) == ("epub", "Voyage", 2)
    assert document.content.split("\n\n") == [
        "## Chapter 1",
        "# Arrival",
        "The ship came in at [dawn](https://e.example/dawn).",
        "## Chapter 2",
        "# Departure",
        "- bags",
    ]
    assert read(book, pages="2").content.startswith("## Chapter 2")


def test_grep_spans_name_the_slide_they_are_on() -> None:
    document = read(ow.pptx([("One", ["alpha"], ""), ("Two", ["beta"], "")]), PPTX, grep="beta")
    assert document.spans is not None
    assert [span.page for span in document.spans] == [2]


RSS = b"""<?xml version="1.0"?>
<rss version="2.0"><channel><title>Harbour news</title>
<item><title>Ferry added</title><link>https://e.example/ferry</link>
<pubDate>Mon, 07 Dec 2026 10:00:00 GMT</pubDate>
<description>&lt;p&gt;Two more &lt;b&gt;crossings&lt;/b&gt; a day.&lt;/p&gt;</description></item>
<item><title>Storm warning</title><link>https://e.example/storm</link>
<description>Stay in port.</description></item>
</channel></rss>"""


def test_a_feed_answers_its_entries_in_order_as_markdown_and_as_a_list() -> None:
    document = read(RSS, "application/rss+xml")
    assert (document.kind, document.title, document.media_type) == (
        "feed",
        "Harbour news",
        "application/rss+xml",
    )
    assert document.entries == [
        {
            "title": "Ferry added",
            "link": "https://e.example/ferry",
            "date": "2026-12-07T10:00:00Z",
            "summary": "Two more crossings a day.",
        },
        {"title": "Storm warning", "link": "https://e.example/storm", "date": "", "summary": "Stay in port."},
    ]
    assert document.content.split("\n\n")[:4] == [
        "# Harbour news",
        "## [Ferry added](https://e.example/ferry)",
        "2026-12-07T10:00:00Z",
        "Two more crossings a day.",
    ]


def test_an_atom_feed_served_as_xml_is_read_as_a_feed() -> None:
    atom = b'<feed xmlns="http://www.w3.org/2005/Atom"><title>Log</title><entry><title>First</title><link href="https://e.example/1"/><updated>2026-01-02T03:04:05Z</updated><summary>Hello</summary></entry></feed>'
    document = read(atom, "application/xml")
    assert document.kind == "feed"
    assert document.media_type == "application/atom+xml"
    assert document.entries == [
        {"title": "First", "link": "https://e.example/1", "date": "2026-01-02T03:04:05Z", "summary": "Hello"}
    ]
    assert read(atom, "text/plain").kind == "text"  # declared plain text stays plain text


def test_csv_is_a_table_only_when_declared_or_named_so() -> None:
    body = b'name;city\n"Smith; J.";Oslo\nLee;Lima\n'
    table = "| name | city |\n| --- | --- |\n| Smith; J. | Oslo |\n| Lee | Lima |"
    assert read(body, "text/csv").content == table
    assert read(body, "text/plain", url="https://files.example/people.csv").content == table
    assert read(body, "text/plain").kind == "text"
    assert read(b"a\tb\n1\t2\n", "text/tab-separated-values").content == "| a | b |\n| --- | --- |\n| 1 | 2 |"


def test_rtf_is_read_as_plain_paragraphs() -> None:
    rtf = (
        rb"{\rtf1\ansi{\fonttbl\f0\fswiss Helvetica;}\f0\pard Caf\'e9 opens {\b today}.\par Second line\par}"
    )
    document = read(rtf, "application/rtf")
    assert (document.kind, document.content) == ("rtf", "Caf\u00e9 opens today.\n\nSecond line")


def test_rtf_tables_are_markdown_tables_split_by_their_cells_not_by_bars() -> None:
    # As Word writes a row: its definition, the cells, then the definition again before \row.
    definition = rb"\trowd\trgaph108\cellx2000\cellx4000"
    rtf = (
        rb"{\rtf1\ansi Intro\par "
        + definition
        + rb"\pard\intbl Quarter\cell Ships\cell\pard\intbl{"
        + definition
        + rb"\row}"
        + definition
        + rb"\pard\intbl Fir|st\cell 1\par 20\cell\pard\intbl{"
        + definition
        + rb"\row}\pard After\par}"
    )
    document = read(rtf, "application/rtf")
    assert document.content == ("Intro\n\n| Quarter | Ships |\n| --- | --- |\n| Fir\\|st | 1 20 |\n\nAfter")


def test_markdown_and_plain_text_stay_as_they_are() -> None:
    text = "# Notes\n\n- one\n- two\n"
    document = read(text.encode(), "text/markdown")
    assert (document.kind, document.media_type, document.content) == ("text", "text/markdown", text)


def test_a_word_document_served_as_octet_stream_is_read_by_its_content() -> None:
    assert read(report_docx(), "application/octet-stream").kind == "docx"
    assert read(report_docx(), "image/png").kind == "docx"


def test_a_png_declared_as_a_word_document_is_refused() -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(64)
    assert refusal(png, DOCX).outcome == "unsupported"


def test_a_zip_of_anything_else_is_unsupported() -> None:
    error = refusal(ow.zipped({"readme.txt": "hello"}), "application/zip")
    assert error.outcome == "unsupported"
    assert "zip archive" in error.message


def test_raw_mode_refuses_an_office_document_and_serves_a_feed_as_served() -> None:
    assert refusal(report_docx(), DOCX, mode="raw").outcome == "unsupported"
    assert read(RSS, "application/rss+xml", mode="raw").content == RSS.decode()


# Hostile documents: each generated here, each answered with an outcome, never a crash.


def test_a_deflate_bomb_is_too_long_while_it_inflates() -> None:
    bomb = ow.deflate_bomb(64 << 20)
    assert len(bomb) < 200_000
    error = refusal(bomb, DOCX)
    assert error.outcome == "too_long"
    assert "inflates past" in error.message


def test_an_archive_of_too_many_members_is_too_long() -> None:
    assert refusal(ow.many_members(archive.MAX_ENTRIES + 1)).outcome == "too_long"


def test_the_inflated_total_is_bounded_whatever_the_ratio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive, "MAX_INFLATED_BYTES", 100_000)
    header = {"kind": "zip", "ranges": None, "max_chars": 10_000_000, "markdown": True}
    reply, _ = read_document(
        header, ow.xlsx([("Big", [[f"cell {i} {j}" for j in range(10)] for i in range(2000)])])
    )
    assert reply["error"] == "too_long"


def test_an_encrypted_member_is_encrypted() -> None:
    locked = ow.with_encrypted_member(report_docx(), "word/document.xml")
    assert refusal(locked, DOCX).outcome == "encrypted"


def test_a_password_protected_office_file_is_encrypted() -> None:
    compound = (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504) + "EncryptedPackage".encode("utf-16-le") + bytes(64)
    )
    error = refusal(compound, DOCX)
    assert error.outcome == "encrypted"
    assert error.outcome.http_status == 422


def test_a_pdf_that_needs_a_password_is_encrypted() -> None:
    plain = build_pdf([["the secret plan"]])
    guard = b"<< /Filter /Standard /V 1 /R 2 /O <" + b"11" * 32 + b"> /U <" + b"22" * 32 + b"> /P -4 >>"
    ids = b"/ID [<00112233445566778899aabbccddeeff> <00112233445566778899aabbccddeeff>]"
    locked = plain.replace(b"/Root 1 0 R >>", b"/Root 1 0 R /Encrypt " + guard + b" " + ids + b" >>")
    assert locked != plain
    assert refusal(locked, "application/pdf").outcome == "encrypted"


def test_an_old_office_document_is_unsupported() -> None:
    assert (
        refusal(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600), "application/msword").outcome
        == "unsupported"
    )


def test_a_password_protected_opendocument_and_a_drm_book_are_encrypted() -> None:
    manifest = (
        '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
        '<manifest:file-entry manifest:full-path="content.xml"><manifest:encryption-data/>'
        "</manifest:file-entry></manifest:manifest>"
    )
    odt = ow.odf("odt", "<text:p>x</text:p>", extra={"META-INF/manifest.xml": manifest})
    assert refusal(odt).outcome == "encrypted"
    encryption = (
        '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:CipherData>'
        '<enc:CipherReference URI="OEBPS/text/c0.xhtml"/></enc:CipherData></enc:EncryptedData></encryption>'
    )
    assert (
        refusal(ow.epub(["<p>x</p>"], extra={"META-INF/encryption.xml": encryption})).outcome == "encrypted"
    )


@pytest.mark.parametrize(
    "document",
    [
        '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><d>&b;</d>',
        '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]><d>&x;</d>',
        '<?xml version="1.0"?><!DOCTYPE d SYSTEM "http://127.0.0.2/evil.dtd"><d/>',
    ],
    ids=["entity-expansion", "external-entity", "external-dtd"],
)
def test_xml_with_entities_or_external_references_is_unreadable(document: str) -> None:
    error = refusal(ow.docx("", extra={"word/document.xml": document}), DOCX)
    assert error.outcome == "unreadable"
    assert error.outcome.http_status == 422
    assert "passwd" not in error.message or "root:" not in error.message


def test_a_feed_declaring_entities_is_unreadable() -> None:
    feed = b'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY x SYSTEM "file:///etc/passwd">]><rss><channel><title>&x;</title></channel></rss>'
    assert refusal(feed, "application/rss+xml").outcome == "unreadable"


def test_corrupt_documents_are_unreadable_with_a_hint() -> None:
    truncated = report_docx()[:300]
    error = refusal(truncated, DOCX)
    assert error.outcome == "unreadable"
    assert error.hint
    broken = ow.docx("", extra={"word/document.xml": "<w:document><w:body><w:p>"})
    assert refusal(broken, DOCX).outcome == "unreadable"


def test_deep_nesting_is_unreadable_not_a_crash() -> None:
    deep = ow.W_NS
    body = "<w:sdt><w:sdtContent>" * 5000 + ow.w_paragraph("x") + "</w:sdtContent></w:sdt>" * 5000
    error = refusal(ow.docx(body), DOCX)
    assert error.outcome == "unreadable"
    assert deep


def test_text_over_the_budget_is_too_long() -> None:
    body = "".join(ow.w_paragraph(f"paragraph {i} " + "word " * 40) for i in range(3000))
    header = {"kind": "zip", "ranges": None, "max_chars": 50_000, "markdown": True}
    reply, _ = read_document(header, ow.docx(body))
    assert reply["error"] == "too_long"


def _long_rows(count: int) -> list[list[str]]:
    words = random.Random(7)
    return [[f"row {i}", " ".join(str(words.random()) for _ in range(8)), "a|b"] for i in range(count)]


@pytest.mark.parametrize("kind", ["xlsx", "ods"])
def test_a_sheet_past_the_budget_stops_at_a_whole_row_and_says_how_to_read_on(kind: str) -> None:
    rows = _long_rows(3000)
    sheets = [("Long", rows), ("Two", rows[:2]), ("Three", rows[:2])]
    document = (
        ow.xlsx(sheets)
        if kind == "xlsx"
        else ow.odf("ods", "".join(ow.ods_table(name, cells) for name, cells in sheets))
    )
    header = {"kind": "zip", "ranges": None, "max_chars": 50_000, "markdown": True}
    reply, text = read_document(header, document)
    assert (reply.get("error"), reply["pages_total"], reply["pages"]) == (None, 3, [1])
    assert 40_000 < len(text) <= 50_000
    table, note = text.rsplit("\n\n", 1)
    assert table.endswith(" | a\\|b |")
    assert note.startswith("[sift stopped reading here")
    assert 'ask for pages "2-"' in note
    reply, text = read_document({**header, "ranges": [[1, 1], [3, None]]}, document)
    assert reply["pages"] == [1]
    assert 'ask for pages "3-"' in text
    reply, text = read_document({**header, "ranges": [[2, None]]}, document)
    assert (reply["pages"], "stopped" in text) == ([2, 3], False)


@pytest.mark.parametrize(
    "document",
    [
        ow.odf("odt", '<text:h text:outline-level="deep">x</text:h>'),
        ow.odf(
            "ods",
            '<table:table><table:table-row table:number-rows-repeated="many">'
            "<table:table-cell><text:p>x</text:p></table:table-cell></table:table-row></table:table>",
        ),
    ],
    ids=["odt-level", "ods-repeat"],
)
def test_values_no_document_holds_are_unreadable_never_internal(document: bytes) -> None:
    assert refusal(document).outcome == "unreadable"


@pytest.mark.parametrize("kind", ["docx", "xlsx", "pptx", "odt", "ods", "odp", "epub"])
def test_damaged_bytes_of_every_format_answer_an_outcome_never_an_exception(kind: str) -> None:
    documents = {
        "docx": report_docx(),
        "xlsx": ow.xlsx([("s", [["a", 1], ["b", 2]])]),
        "pptx": ow.pptx([("t", ["b"], "n")]),
        "odt": ow.odf("odt", '<text:h text:outline-level="1">x</text:h><text:p>y</text:p>'),
        "ods": ow.odf("ods", ow.ods_table("a", [["1", "2"]])),
        "odp": ow.odf("odp", ow.odp_page("t", ["l"], "n")),
        "epub": ow.epub(["<h1>x</h1><p>y</p>"]),
    }
    rng = random.Random(kind)
    header = {"kind": "zip", "ranges": None, "max_chars": 100_000, "markdown": True}
    errors = set()
    for _ in range(60):
        damaged = bytearray(documents[kind])
        for _ in range(rng.randint(1, 6)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        reply, _ = read_document(header, bytes(damaged))  # raises nothing
        errors.add(reply.get("error"))
    assert errors <= {None, "unreadable", "unsupported", "too_long", "encrypted"}
