r"""Delimited text (CSV, TSV) as a Markdown table, and RTF as paragraphs and tables.

A CSV's delimiter is guessed from its first lines among comma, semicolon, tab and bar (comma when
none stands out); a TSV's is the tab. RTF is read by striprtf for its text, its tables marked
first: a row's definition (``\trowd``), each cell's end (``\cell``) and the row's end (``\row``)
become characters no RTF file holds, so that the rows come back as a Markdown table (cells split
by their own mark, never by a ``|`` of their text). The sandbox child runs this.
"""

from __future__ import annotations

import csv
import io
import re

from fetch.documents.archive import unreadable
from fetch.documents.blocks import Writer

_DELIMITERS = ",;\t|"
_SAMPLE_CHARS = 8192
# A field longer than this is damage (or an attack on the reader), not a cell.
MAX_FIELD_CHARS = 1 << 20


def read_delimited(text: str, writer: Writer, *, tabs: bool) -> None:
    delimiter = "\t" if tabs else _guess_delimiter(text[:_SAMPLE_CHARS])
    csv.field_size_limit(MAX_FIELD_CHARS)
    rows: list[list[str]] = []
    size = 0
    try:
        for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter):
            rows.append(row)
            size += sum(len(cell) + 3 for cell in row)
            writer.budget.check(size)
    except csv.Error as exc:
        raise unreadable(f"the table cannot be read at line {len(rows) + 1} ({exc})") from None
    writer.table(rows)


def _guess_delimiter(sample: str) -> str:
    """The delimiter that splits the sample's first lines most consistently into most fields."""
    lines = [line for line in sample.splitlines()[:20] if line.strip()]
    if len(lines) > 1 and not sample.endswith("\n"):
        lines = lines[:-1]  # the last line of a sample may be cut short
    best, best_fields = ",", 1
    for delimiter in _DELIMITERS:
        try:
            counts = {len(row) for row in csv.reader(lines, delimiter=delimiter)}
        except csv.Error:
            continue
        if len(counts) == 1 and (fields := counts.pop()) > best_fields:
            best, best_fields = delimiter, fields
    return best


# Marks of a table row's start, a cell's end and a row's end (private-use characters: an RTF file
# is 7-bit, so its decoded text holds none of them).
_ROW_START, _CELL, _ROW_END = "\ue000", "\ue001", "\ue002"
_TABLE_WORDS = re.compile(r"(?<!\\)\\(trowd|cell|row)(?![A-Za-z])")
_MARK = {"trowd": _ROW_START, "cell": _CELL, "row": _ROW_END}
_MARKS = re.compile(f"[{_ROW_START}{_CELL}{_ROW_END}]")


def read_rtf(payload: bytes, writer: Writer) -> None:
    from striprtf.striprtf import rtf_to_text  # noqa: PLC0415 — imported by the first RTF only

    # RTF is 7-bit: other characters are escapes, which striprtf decodes with the file's code page.
    source = _TABLE_WORDS.sub(lambda word: _MARK[word[1]], payload.decode("latin-1"))
    text = rtf_to_text(source, errors="replace").replace("\r\n", "\n")
    rows: list[list[str]] = []
    size = at = 0
    for end in (found.start() for found in re.finditer(_ROW_END, text)):
        segment = text[at:end]
        start = segment.find(_ROW_START)
        before, row = (segment[:start], segment[start:]) if start >= 0 else ("", segment)
        if before.strip():
            writer.table(rows)
            rows = []
            _paragraphs(before, writer)
        cells = row.replace(_ROW_START, "").split(_CELL)
        if len(cells) > 1 and not cells[-1].strip():
            cells.pop()  # what follows a row's last cell is the row's end
        rows.append([" ".join(cell.split()) for cell in cells])
        size += sum(len(cell) + 3 for cell in rows[-1])
        writer.budget.check(size)
        at = end + 1
    writer.table(rows)
    _paragraphs(text[at:], writer)


def _paragraphs(text: str, writer: Writer) -> None:
    for paragraph in _MARKS.sub("", text).split("\n"):
        writer.block(paragraph)
