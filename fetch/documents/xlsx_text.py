"""A workbook (XLSX, Office Open XML) as Markdown: each sheet a part headed by its name
(``blocks.sheet_heading``), its cells a table (the first row its header), dates written as dates.

Only the sheets asked for are read, a row at a time (``archive.children_of``): a large sheet is
never held whole. Where the next row would take the text past its budget, the reading stops (a
line says so, and which sheets ``pages`` can still ask for) and the sheets read so far are the
answer, so a workbook too large to read whole still answers in slices. The sandbox child runs
this: standard library and lxml only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from functools import lru_cache

from fetch.documents.archive import Archive, Element, children_of, parse, unreadable
from fetch.documents.blocks import CUT_NOTE_ROOM, TableSize, Writer, cut_note, sheet_heading
from fetch.documents.ooxml import core_title, part_path, relationships

S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_COLUMN = re.compile(r"^([A-Z]{1,3})")
# The most columns a row is widened to: Excel's own limit.
MAX_COLUMNS = 16_384
# Built-in number formats that show a date (ECMA-376, 18.8.30), and a custom format's date codes
# outside quotes and brackets.
_DATE_FORMATS = frozenset({14, 15, 16, 17, 18, 19, 20, 21, 22, 45, 46, 47})
_DATE_CODE = re.compile(r"[dmyhs]", re.IGNORECASE)
_QUOTED = re.compile(r'"[^"]*"|\[[^\]]*\]|\\.')
_EPOCH = datetime(1899, 12, 30)
_T, _V = f"{S}t", f"{S}v"


def sheets(archive: Archive) -> tuple[str, list[tuple[str, str]]]:
    """The workbook's path and its sheets in order, each as (name, path)."""
    main = part_path(archive, "xl/workbook.xml", "officeDocument")
    if not archive.has(main):
        raise unreadable("the workbook has no sheet list")
    links = relationships(archive, main)
    listed = parse(archive.open(main)).find(f"{S}sheets")
    found = [
        (sheet.get("name", ""), links.get(sheet.get(f"{R}id", ""), ""))
        for sheet in ([] if listed is None else listed)
    ]
    return main, [(name, path) for name, path in found if archive.has(path)]


def read_xlsx(archive: Archive, writer: Writer, wanted: Callable[[int], list[int]]) -> tuple[str | None, int]:
    """Write the sheets ``wanted(total)`` chooses (those past a sheet cut at the budget are
    dropped from its list); the title and the number of sheets."""
    main, listed = sheets(archive)
    chosen = wanted(len(listed))
    strings = _SharedStrings(archive, main)
    dates = _date_styles(archive, main) if chosen else frozenset()
    for index, number in enumerate(chosen):
        name, path = listed[number - 1]
        writer.part(number, sheet_heading(number, name))
        rows, cut = _rows(archive, path, strings, dates, writer.budget.left() - CUT_NOTE_ROOM)
        writer.table(rows)
        if cut:
            cut_note(writer, chosen[index + 1] if index + 1 < len(chosen) else None)
            del chosen[index + 1 :]
            break
    return core_title(archive), len(listed)


class _SharedStrings:
    """The workbook's shared strings, read as far as the cells asked for need: a writer lists them
    in the order cells first use them, so a reading cut at the budget never parses the rest."""

    def __init__(self, archive: Archive, main: str) -> None:
        path = next((p for p in relationships(archive, main).values() if p.endswith("sharedStrings.xml")), "")
        self._read: list[str] = []
        self._items: Iterator[Element] | None = (
            children_of(archive.open(path), f"{S}sst", tag=f"{S}si") if archive.has(path) else None
        )

    def get(self, index: int) -> str:
        while index >= len(self._read) and self._items is not None:
            item = next(self._items, None)
            if item is None:
                self._items = None
            else:
                self._read.append(_item_text(item))
        return self._read[index] if 0 <= index < len(self._read) else ""


def _item_text(item: Element) -> str:
    """A shared string's text: its own <t>, or its rich runs' (a phonetic guide, <rPh>, is not)."""
    first = item[0] if len(item) else None
    if first is not None and first.tag == f"{S}t" and len(item) == 1:
        return str(first.text or "")
    return "".join(t.text or "" for t in item.iterchildren(f"{S}t", f"{S}r") for t in _run_texts(t))


def _run_texts(element: Element) -> list[Element]:
    return [element] if element.tag == f"{S}t" else list(element.iterchildren(f"{S}t"))


def _date_styles(archive: Archive, main: str) -> frozenset[int]:
    """Indices of the cell styles whose number format shows a date."""
    path = next((p for p in relationships(archive, main).values() if p.endswith("styles.xml")), "")
    if not archive.has(path):
        return frozenset()
    root = parse(archive.open(path))
    custom = {
        int(fmt.get("numFmtId", "-1")): _QUOTED.sub("", fmt.get("formatCode", ""))
        for fmt in root.iter(f"{S}numFmt")
        if fmt.get("numFmtId", "").isdigit()
    }
    styles = root.find(f"{S}cellXfs")
    if styles is None:
        return frozenset()
    dated = set()
    for index, style in enumerate(styles.findall(f"{S}xf")):
        number = int(style.get("numFmtId", "0")) if style.get("numFmtId", "0").isdigit() else 0
        if number in _DATE_FORMATS or (number in custom and _DATE_CODE.search(custom[number])):
            dated.add(index)
    return frozenset(dated)


def _rows(
    archive: Archive, path: str, strings: _SharedStrings, dates: frozenset[int], room: int
) -> tuple[list[list[str]], bool]:
    """The sheet's rows, as many whole rows as fit in ``room`` characters of table; and whether
    it was cut there."""
    rows: list[list[str]] = []
    size = TableSize()
    for row in children_of(archive.open(path), f"{S}sheetData", tag=f"{S}row"):
        cells: list[str] = []
        for cell in row.iter(f"{S}c"):
            column = _column(cell.get("r", ""), len(cells))
            if column >= MAX_COLUMNS:
                continue
            text = _cell_text(cell, strings, dates)
            if not text:
                continue
            cells.extend([""] * (column - len(cells)))
            cells.append(text)
        if cells:
            if not size.add_within(cells, room):
                return rows, True
            rows.append(cells)
    return rows, False


def _column(reference: str, next_column: int) -> int:
    """The 0-based column of a cell reference (``"C7"`` → 2); the next one where it has none."""
    column = _letters_column(reference.rstrip("0123456789"))
    return next_column if column < 0 else column


@lru_cache(maxsize=1 << 15)
def _letters_column(letters: str) -> int:
    """The 0-based column a reference's letters name (``"C"`` → 2), -1 for none."""
    match = _COLUMN.match(letters)
    if match is None:
        return -1
    number = 0
    for letter in match[1]:
        number = number * 26 + ord(letter) - 64
    return number - 1


def _cell_text(cell: Element, strings: _SharedStrings, dates: frozenset[int]) -> str:
    kind = cell.get("t")
    if kind == "inlineStr":
        return "".join(t.text or "" for t in cell.iter(_T))
    raw = next((str(child.text or "") for child in cell if child.tag == _V), "").strip()
    if not raw:
        return ""
    if kind == "s":
        return strings.get(int(raw) if raw.isdigit() else -1)
    if kind == "b":
        return "TRUE" if raw == "1" else "FALSE"
    style = cell.get("s")
    if dates and kind in (None, "n") and style is not None and style.isdigit() and int(style) in dates:
        return _date(raw)
    return str(raw)


def _date(serial: str) -> str:
    """A date serial as ISO 8601 (a date alone when it has no time of day)."""
    try:
        moment = _EPOCH + timedelta(days=float(serial))
    except (ValueError, OverflowError):
        return serial
    moment = moment.replace(microsecond=0) + timedelta(seconds=round(moment.microsecond / 1e6))
    return moment.date().isoformat() if moment.time() == datetime.min.time() else moment.isoformat(sep=" ")
