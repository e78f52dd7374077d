"""An OpenDocument spreadsheet (ODS) as Markdown: each sheet a part headed by its name
(``blocks.sheet_heading``), its cells a table (the first row its header).

Rows are read one at a time and cleared, so a large sheet is never held whole; repeated rows and
cells are written out only where they hold text, at most ``MAX_REPEAT`` times. Where the next row
would take the text past its budget, the reading stops there, as for a workbook
(``xlsx_text``). The sandbox child
runs this: standard library and lxml only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fetch.documents.archive import Archive, Element, elements
from fetch.documents.blocks import CUT_NOTE_ROOM, TableSize, Writer, cut_note, sheet_heading
from fetch.documents.odf_text import MAX_REPEAT, OFFICE, TABLE, Styles, meta_title, row_cells

_SHEET = f"{TABLE}table"
_ROW = f"{TABLE}table-row"


def read_ods(archive: Archive, writer: Writer, wanted: Callable[[int], list[int]]) -> tuple[str | None, int]:
    """Write the sheets ``wanted(total)`` chooses (those past a sheet cut at the budget are
    dropped from its list); the title and the number of sheets."""
    styles = Styles(archive)
    total = sum(1 for _ in _sheets(archive, set(), styles, writer))
    asked = wanted(total)
    for number, name, rows, cut in _sheets(archive, set(asked), styles, writer):
        if number not in asked:
            continue
        writer.part(number, sheet_heading(number, name))
        writer.table(rows)
        if cut:
            later = asked[asked.index(number) + 1 :]
            cut_note(writer, later[0] if later else None)
            del asked[asked.index(number) + 1 :]
            break
    return meta_title(archive), total


def _sheets(
    archive: Archive, chosen: set[int], styles: Styles, writer: Writer
) -> Iterator[tuple[int, str, list[list[str]], bool]]:
    """Each sheet of the spreadsheet's body: its number, name, rows (read for ``chosen`` sheets
    only; the others are counted and skipped) and whether its rows were cut where the next would
    not fit in the budget (then it is the last)."""
    number, name, room = 0, "", 0
    size = TableSize()
    rows: list[list[str]] = []
    sheet: Element | None = None
    # Only sheets and rows come up to Python (lxml filters the rest, at C speed); a row is read
    # whole at its end, then removed with its cells.
    for event, element in elements(archive.open("content.xml"), tag=(_SHEET, _ROW)):
        if event == "start":
            if element.tag == _SHEET and _in_body(element):
                number, name, rows, size = number + 1, element.get(f"{TABLE}name", ""), [], TableSize()
                room = writer.budget.left() - CUT_NOTE_ROOM - len(name) - 20
                sheet = element
            continue
        if element.tag == _ROW and number in chosen and _row_of(element) is sheet is not None:
            cells = row_cells(element, styles)
            if any(cells):
                repeat = min(int(element.get(f"{TABLE}number-rows-repeated", "1") or 1), MAX_REPEAT)
                for _ in range(repeat):
                    if not size.add_within(cells, room):
                        yield number, name, rows, True
                        return
                    rows.append(cells)
        if element is sheet:
            yield number, name, rows, False
            rows, sheet = [], None
        parent = element.getparent()
        element.clear()
        if parent is not None:
            parent.remove(element)


def _row_of(row: Element) -> Element | None:
    """The table a row belongs to."""
    return next(row.iterancestors(_SHEET), None)


def _in_body(sheet: Element) -> bool:
    """Whether a table is a sheet of the spreadsheet's body (not a table nested in a cell)."""
    ancestors = [element.tag for element in sheet.iterancestors()]
    return _SHEET not in ancestors and f"{OFFICE}spreadsheet" in ancestors
