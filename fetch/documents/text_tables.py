"""Delimited text (CSV, TSV) as a Markdown table, and RTF as plain text.

A CSV's delimiter is guessed from its first lines among comma, semicolon, tab and bar (comma when
none stands out); a TSV's is the tab. RTF is read by striprtf for its text (RTF keeps no
structure an agent needs that striprtf could give back). The sandbox child runs this.
"""

from __future__ import annotations

import csv
import io

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


def read_rtf(payload: bytes, writer: Writer) -> None:
    from striprtf.striprtf import rtf_to_text  # noqa: PLC0415 — imported by the first RTF only

    # RTF is 7-bit: other characters are escapes, which striprtf decodes with the file's code page.
    text = rtf_to_text(payload.decode("latin-1"), errors="replace")
    for paragraph in text.replace("\r\n", "\n").split("\n"):
        writer.block(paragraph)
