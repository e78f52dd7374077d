"""The data tables of a page's main content as data: ``{caption, headers, rows, start}``.

The tables are read from the answer's own text, so that the data and the Markdown table in
``content`` agree cell for cell: each run of ``| cell | cell |`` lines is a table, the row above
its last header line (``|---|``) its headers when the page's table has a header, every row
padded to the same length, each cell's
Markdown marks (links, emphasis, escaped bars) taken off, ``start`` the offset of its first line
in the whole text. Spanned cells were repeated into every column and row they cover before the
page was read (``fetch.html.markdown``), so the rows keep their columns.

Each run is matched to a ``<table>`` of the page (``page_tables``, read from the parsed page) by
the cells they share; a run that matches none is no table of the page, and a layout table is no
data table: one marked ``role="presentation"``, one holding another table, or one without a
header whose rows hold one cell each. The page's ``<caption>`` comes from the match (the
extractor writes it as a first row of its own). The tables and their cells are capped in number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import lxml.html

MAX_TABLES = 50
MAX_CELLS = 10_000
MAX_CHARS = 200_000  # of all the cells' text
CELL_CHARS = 1000
# A run of lines is a page's table when at least this share of its non-empty cells is one of the
# table's cells.
MATCH_SHARE = 0.5
MAX_PAGE_TABLES = 500
MAX_CELLS_READ = 20_000
# The runs of table lines weighed, the cells of a row compared with the page's tables, and the
# rows looked for among all of them (a row that its table holds is not looked for).
MAX_RUNS = 200
MATCHED_CELLS = 200
MAX_SEARCHES = 2000
_BAR = re.compile(r"(?<!\\)\|")
_RULE = re.compile(r"^\s*:?-{3,}:?\s*$")
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\s]*\)")
_LINK = re.compile(r"\[([^\]\n]*)\]\((?:[^()\s]|\([^()\s]*\))*\)")
_STRONG = re.compile(r"(\*\*|__)(.+?)\1")
_EMPHASIS = re.compile(r"(?<![\w*])\*(\S(?:.*?\S)?)\*(?![\w*])")
_CODE = re.compile(r"`([^`]*)`")
_SPACES = re.compile(r"\s+")
_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>])")


@dataclass(frozen=True)
class PageTable:
    """A ``<table>`` of the parsed page: its caption, whether it is for layout, its cells' texts."""

    caption: str | None
    layout: bool
    headed: bool  # its first row is of <th> cells, or it has a <thead>
    cells: frozenset[str]


def page_tables(tree: lxml.html.HtmlElement) -> list[PageTable]:
    """The page's tables (the first ``MAX_PAGE_TABLES``), their cells read as normalised text."""
    found: list[PageTable] = []
    read = 0
    for table in tree.iter("table"):
        if len(found) == MAX_PAGE_TABLES or read > MAX_CELLS_READ:
            break
        rows = [row for row in table.iter("tr") if next(row.iterancestors("table"), None) is table]
        cells = [[cell for cell in row if cell.tag in ("td", "th")] for row in rows]
        texts = frozenset(_key(cell.text_content()) for row in cells for cell in row[:200])
        read += len(texts)
        caption = table.find("caption")
        caption_text = (
            _SPACES.sub(" ", caption.text_content()).strip()[:CELL_CHARS] if caption is not None else ""
        )
        # The extractor writes the caption as a row of its own, which this table holds too.
        found.append(
            PageTable(
                caption_text or None,
                _layout(table, cells),
                _headed(table, cells),
                texts - {""} | {_key(caption_text)},
            )
        )
    return found


def _headed(table: lxml.html.HtmlElement, cells: list[list[lxml.html.HtmlElement]]) -> bool:
    """A ``<thead>``, or a first row all of ``<th>`` above one that is not (a table whose rows
    each start with a ``<th>`` label is headed by its first column, not its first row)."""
    if table.find("thead") is not None:
        return True
    if not cells or not cells[0] or any(cell.tag != "th" for cell in cells[0]):
        return False
    return len(cells) == 1 or any(cell.tag != "th" for cell in cells[1])


def _layout(table: lxml.html.HtmlElement, cells: list[list[lxml.html.HtmlElement]]) -> bool:
    if (table.get("role") or "").strip().lower() in ("presentation", "none"):
        return True
    if table.find(".//table") is not None:
        return True
    headed = table.find(".//th") is not None or table.find("thead") is not None
    single = sum(1 for row in cells if sum(1 for cell in row if cell.text_content().strip()) <= 1)
    return not headed and single * 2 > len(cells)


def content_tables(content: str, tables: list[PageTable]) -> list[dict[str, Any]]:
    """The data tables written in ``content`` (the whole text), in order, capped."""
    found: list[dict[str, Any]] = []
    cells = chars = 0
    searches = [MAX_SEARCHES]
    for start, lines in _runs(content)[:MAX_RUNS]:
        for offset, group, match in _split(start, lines, tables, searches):
            if match is None or match.layout:
                continue
            table = _table(group, match)
            if table is None:
                continue
            width = len(table["rows"][0])
            size = sum(len(cell) for row in [table["headers"], *table["rows"]] for cell in row)
            if cells + width * (len(table["rows"]) + 1) > MAX_CELLS or chars + size > MAX_CHARS:
                continue
            cells, chars = cells + width * (len(table["rows"]) + 1), chars + size
            found.append({**table, "start": offset})
            if len(found) == MAX_TABLES:
                return found
    return found


def _table(lines: list[str], match: PageTable) -> dict[str, Any] | None:
    """The caption, headers and rows of one table's lines; None when it has no row of data."""
    rows, rules = _rows(lines)
    if match.caption and rules and rules[0] == 1 and _key(rows[0][0]) == _key(match.caption):
        rows, rules = rows[1:], [rule - 1 for rule in rules[1:]]
    # A writer of Markdown puts a header line under the first row of any table, and text mode
    # none: the row above it (or the first) is a header when the page's table has one.
    first = rules[-1] if rules else 1
    headers = rows[first - 1] if match.headed and rows else []
    body = rows[first:] if headers else rows
    if not body:
        return None
    width = max(len(row) for row in [headers, *body])
    return {
        "caption": match.caption,
        "headers": _padded(headers, width) if headers else [],
        "rows": [_padded(row, width) for row in body],
    }


def _split(
    start: int, lines: list[str], tables: list[PageTable], searches: list[int]
) -> list[tuple[int, list[str], PageTable | None]]:
    """A run's lines cut where they pass from one page table to another (text mode writes two
    tables with no line between them): each part's offset, lines and table."""
    parts: list[tuple[int, list[str], PageTable | None]] = []
    current: list[str] = []
    table: PageTable | None = None
    offset = part_start = start
    for line in lines:
        cells = _cells(line)
        rule = bool(cells) and all(_RULE.match(cell) for cell in cells)
        keys = [] if rule else [key for key in (_key(_plain(cell)) for cell in cells) if key][:MATCHED_CELLS]
        if keys and not (table is not None and _share(keys, table) >= MATCH_SHARE) and searches[0] > 0:
            searches[0] -= 1
            best = _match(keys, tables)
            if current and best is not table:
                parts.append((part_start, current, table))
                current, part_start = [], offset
            table = best
        current.append(line)
        offset += len(line) + 1
    if current:
        parts.append((part_start, current, table))
    return parts


def _runs(content: str) -> list[tuple[int, list[str]]]:
    """Each run of table lines in ``content``: the offset of its first line, and its lines."""
    runs: list[tuple[int, list[str]]] = []
    offset = 0
    current: list[str] = []
    start = 0
    for line in content.split("\n"):
        if line.lstrip().startswith("|") and line.rstrip().endswith("|") and len(line.strip()) > 1:
            if not current:
                start = offset
            current.append(line)
        elif current:
            runs.append((start, current))
            current = []
        offset += len(line) + 1
    if current:
        runs.append((start, current))
    return runs


def _rows(lines: list[str]) -> tuple[list[list[str]], list[int]]:
    """The rows of a run's lines (cells as plain text) and, for each header line, the number of
    rows above it."""
    rows: list[list[str]] = []
    rules: list[int] = []
    for line in lines:
        cells = _cells(line)
        if cells and all(_RULE.match(cell) for cell in cells):
            rules.append(len(rows))
            continue
        rows.append([_plain(cell) for cell in cells])
    rules = [rule for rule in rules if rule > 0]
    return rows, rules


def _plain(cell: str) -> str:
    """A cell's text without its Markdown marks."""
    text = cell.strip()
    if "](" in text:
        text = _LINK.sub(r"\1", _IMAGE.sub(r"\1", text))
    if "*" in text or "_" in text:
        text = _EMPHASIS.sub(r"\1", _STRONG.sub(r"\2", text))
    if "`" in text:
        text = _CODE.sub(r"\1", text)
    if "\\" in text:
        text = _ESCAPED.sub(r"\1", text)
    return text.strip()[:CELL_CHARS]


def _cells(line: str) -> list[str]:
    return _BAR.split(line.strip())[1:-1]


def _match(keys: list[str], tables: list[PageTable]) -> PageTable | None:
    """The page's table that holds most of ``keys``, if it holds at least ``MATCH_SHARE`` of them."""
    best, best_share = None, MATCH_SHARE
    for table in tables:
        share = _share(keys, table)
        if share >= best_share and (best is None or share > best_share):
            best, best_share = table, share
    return best


def _share(keys: list[str], table: PageTable) -> float:
    return sum(1 for key in keys if key in table.cells) / len(keys)


def _key(text: str) -> str:
    return _SPACES.sub(" ", text).strip().lower()[:200]


def _padded(row: list[str], width: int) -> list[str]:
    return row + [""] * (width - len(row))
