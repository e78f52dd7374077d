"""An OpenDocument spreadsheet (ODS) as Markdown: each sheet a part headed by its number and name,
its cells a table (the first row its header).

Rows are read one at a time and cleared, so a large sheet is never held whole; repeated rows and
cells are written out only where they hold text, at most ``MAX_REPEAT`` times. The sandbox child
runs this: standard library and lxml only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fetch.documents.archive import Archive, Element, elements
from fetch.documents.blocks import Writer
from fetch.documents.odf_text import MAX_REPEAT, OFFICE, TABLE, Styles, meta_title, row_cells

_SHEET = f"{TABLE}table"
_ROW = f"{TABLE}table-row"


def read_ods(archive: Archive, writer: Writer, wanted: Callable[[int], list[int]]) -> tuple[str | None, int]:
    """Write the sheets ``wanted(total)`` chooses; the title and the number of sheets."""
    styles = Styles(archive)
    total = sum(1 for _ in _sheets(archive, set(), styles, writer))
    chosen = set(wanted(total))
    for number, name, rows in _sheets(archive, chosen, styles, writer):
        if number in chosen:
            writer.part(number, f"Sheet {number}: {name}" if name else f"Sheet {number}")
            writer.table(rows)
    return meta_title(archive), total


def _sheets(
    archive: Archive, chosen: set[int], styles: Styles, writer: Writer
) -> Iterator[tuple[int, str, list[list[str]]]]:
    """Each sheet of the spreadsheet's body: its number, name and rows (read for ``chosen``
    sheets only; the others are counted and skipped)."""
    stack: list[Element] = []
    number, name, size = 0, "", 0
    rows: list[list[str]] = []
    for event, element in elements(archive.open("content.xml")):
        if event == "start":
            stack.append(element)
            if element.tag == _SHEET and _in_body(stack):
                number, name, rows, size = number + 1, element.get(f"{TABLE}name", ""), [], 0
            continue
        stack.pop()
        if element.tag == _ROW and number in chosen and _in_body(stack):
            cells = row_cells(element, styles)
            if any(cells):
                repeat = min(int(element.get(f"{TABLE}number-rows-repeated", "1") or 1), MAX_REPEAT)
                rows.extend([cells] * repeat)
                size += repeat * sum(len(cell) + 3 for cell in cells)
                writer.budget.check(size)
        if element.tag == _SHEET and _in_body([*stack, element]):
            yield number, name, rows
            rows = []
        if element.tag in (_ROW, _SHEET) and stack:
            stack[-1].remove(element)


def _in_body(stack: list[Element]) -> bool:
    """Whether the element atop ``stack`` belongs to the spreadsheet body (not a nested table)."""
    sheets = [element for element in stack if element.tag == _SHEET]
    return len(sheets) == 1 and any(element.tag == f"{OFFICE}spreadsheet" for element in stack)
