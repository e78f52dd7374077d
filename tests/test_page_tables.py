"""``tables: true`` (docs/api.md, "Page facts"): the data tables of the main content as data, in
agreement with the Markdown tables of ``content``, through ``extract`` and the sandbox child."""

from __future__ import annotations

import re
from typing import Any

import pytest

from fetch.answer import slices
from fetch.extract import Extracted, extract
from fetch.html.facts.tables import MAX_TABLES
from fetch.targets import Target, TargetOptions

URL = "https://data.example/report"
TEXT = "".join(
    f"<p>Paragraph {n} of the report, which explains the figures below in plain words for readers.</p>"
    for n in range(4)
)
PRICES = (
    "<table><caption>Prices 2024</caption><thead><tr><th>Fruit</th><th>Price</th><th>Stock</th></tr></thead>"
    '<tbody><tr><td>Apple</td><td>1.20</td><td rowspan="2">yes</td></tr>'
    '<tr><td colspan="2">Pear | special</td></tr>'
    '<tr><td><a href="/kiwi">Kiwi</a> <b>gold</b></td><td>3</td><td></td></tr></tbody></table>'
)
SIZES = "<table><tr><td>Weight</td><td>2 kg</td></tr><tr><td>Colour</td><td>Blue</td></tr></table>"
ONE_CELL_ROWS = (
    "<table><tr><td>A layout cell holding a line</td></tr><tr><td>Another layout cell</td></tr></table>"
)
PRESENTATION = (
    '<table role="presentation"><tr><td>Left column words</td><td>Right column words</td></tr></table>'
)


def read(body: str, **options: Any) -> Extracted:
    markup = f"<!doctype html><html><body><main><article><h1>Report</h1>{body}</article></main></body></html>"
    return extract(
        markup.encode(), declared_type="text/html", charset="utf-8", url=URL, options=TargetOptions(**options)
    )


def markdown_rows(text: str) -> list[list[str]]:
    """The rows of the first Markdown table in ``text``, rule lines left out, marks as written."""
    rows = []
    for line in text.split("\n"):
        if not line.startswith("|"):
            break
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if not all(re.fullmatch(r":?-{3,}:?", cell) for cell in cells):
            rows.append(cells)
    return rows


@pytest.mark.parametrize("mode", ["markdown", "text"])
def test_spanned_cells_are_repeated_and_the_data_agrees_with_the_text(mode):
    document = read(TEXT + PRICES + "<p>Between the two tables.</p>" + SIZES, tables=True, mode=mode)
    assert document.tables is not None
    prices, specs = document.tables
    assert prices["caption"] == "Prices 2024"
    assert prices["headers"] == ["Fruit", "Price", "Stock"]
    assert prices["rows"] == [
        ["Apple", "1.20", "yes"],
        ["Pear | special", "Pear | special", "yes"],
        ["Kiwi gold", "3", ""],
    ]
    assert (specs["caption"], specs["headers"], specs["rows"]) == (
        None,
        [],
        [["Weight", "2 kg"], ["Colour", "Blue"]],
    )
    for table in (prices, specs):
        written = markdown_rows(document.content[table["start"] :])
        shown = (
            written[1:] if written[0] == [table["caption"], "", ""] else written
        )  # as trafilatura writes it
        plain = [[re.sub(r"\[([^\]]*)\]\([^)]*\)|\*\*", r"\1", cell) for cell in row] for row in shown]
        expected = [table["headers"], *table["rows"]] if table["headers"] else table["rows"]
        assert plain == expected


def test_layout_tables_are_left_out_and_so_is_text_that_only_looks_like_one():
    body = TEXT + ONE_CELL_ROWS + PRESENTATION + "<p>| not | a | table |</p>" + SIZES
    document = read(body, tables=True, mode="text")
    assert document.tables is not None
    assert [table["rows"] for table in document.tables] == [[["Weight", "2 kg"], ["Colour", "Blue"]]]


def test_a_page_laid_out_in_a_table_keeps_the_data_table_inside_it():
    body = f"<table><tr><td>{TEXT}{SIZES}</td><td>Side column</td></tr></table>"
    document = read(body, tables=True)
    assert document.tables is not None
    assert [table["rows"] for table in document.tables] == [[["Weight", "2 kg"], ["Colour", "Blue"]]]


def test_tables_are_capped_in_number():
    many = "".join(
        f"<h2>Part {n}</h2><table><tr><th>Key {n}</th><th>Value</th></tr>"
        f"<tr><td>k{n}</td><td>v{n}</td></tr></table>"
        for n in range(MAX_TABLES + 20)
    )
    document = read(TEXT + many, tables=True)
    assert document.tables is not None
    assert len(document.tables) == MAX_TABLES
    assert document.tables[0]["rows"] == [["k0", "v0"]]


def test_without_tables_asked_none_are_answered():
    assert read(TEXT + SIZES).tables is None


def test_a_table_labelled_by_its_first_column_has_no_header_row_and_loses_escapes():
    labelled = (
        "<table><tr><th>Brand</th><td>Martinsen</td></tr><tr><th>Daily value*</th><td>2 kg</td></tr>"
        "<tr><th>Grill</th><td>Steel</td></tr></table>"
    )
    document = read(TEXT + labelled, tables=True)
    assert document.tables is not None
    assert document.tables[0]["headers"] == []
    assert document.tables[0]["rows"] == [
        ["Brand", "Martinsen"],
        ["Daily value*", "2 kg"],
        ["Grill", "Steel"],
    ]


def test_a_slice_answers_the_tables_that_start_in_it_and_offsets_hold_across_slices(settings):
    document = read(TEXT + PRICES + "<p>Between the two tables.</p>" + SIZES, tables=True)
    assert document.tables is not None
    prices, specs = document.tables
    target = Target(URL, TargetOptions(tables=True, max_chars=specs["start"]))
    first = slices.answer(document, target, slices.Start(), caller="agent")
    assert [table["start"] for table in first["tables"]] == [prices["start"]]
    rest = slices.answer(
        document, target, slices.Start(specs["start"], document.content_sha256, exact=True), caller="agent"
    )
    assert rest["tables"] == [specs]
    assert rest["content"].startswith("| Weight | 2 kg |")
