"""OpenDocument text and presentations (ODT, ODP) as Markdown: headings by outline level,
paragraphs, lists (numbered where their style numbers them), tables, links, bold and italic; a
presentation's slides as parts headed by number and title, with their notes.

A text's body is read one top-level element at a time (``archive.children_of``). The sandbox
child runs this: standard library and lxml only. Spreadsheets: ``odf_sheets``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fetch.documents.archive import Archive, Element, children_of, elements, parse
from fetch.documents.blocks import Run, Writer

OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
FO = "{urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0}"
DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
PRESENTATION = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
XLINK = "{http://www.w3.org/1999/xlink}"
DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
MAX_REPEAT = 1000
# What a run's text never holds: notes are read at their own place, annotations are not text.
_SKIPPED = frozenset({f"{TEXT}note", f"{OFFICE}annotation", f"{TEXT}bookmark-ref", f"{TEXT}soft-page-break"})


class Styles:
    """Which text styles are bold or italic, and which list styles are numbered."""

    def __init__(self, archive: Archive) -> None:
        self.bold: set[str] = set()
        self.italic: set[str] = set()
        self.numbered: set[str] = set()
        if archive.has("styles.xml"):
            self._read(parse(archive.open("styles.xml")))
        # The content's own styles come before its body: the parse stops at their end.
        tag = f"{OFFICE}automatic-styles"
        for _event, styles in elements(archive.open("content.xml"), events=("end",), tag=tag):
            self._read(styles)
            break

    def _read(self, root: Element) -> None:
        for style in root.iter(f"{STYLE}style"):
            name = style.get(f"{STYLE}name", "")
            properties = style.find(f"{STYLE}text-properties")
            if properties is not None and properties.get(f"{FO}font-weight") in ("bold", "700", "800", "900"):
                self.bold.add(name)
            if properties is not None and properties.get(f"{FO}font-style") in ("italic", "oblique"):
                self.italic.add(name)
        for listed in root.iter(f"{TEXT}list-style"):
            first = next(iter(listed), None)
            if first is not None and first.tag == f"{TEXT}list-level-style-number":
                self.numbered.add(listed.get(f"{STYLE}name", ""))


def meta_title(archive: Archive) -> str | None:
    if not archive.has("meta.xml"):
        return None
    element = parse(archive.open("meta.xml")).find(f"{OFFICE}meta/{DC_TITLE}")
    title = (element.text or "").strip() if element is not None else ""
    return title or None


def runs(
    element: Element, styles: Styles, bold: bool = False, italic: bool = False, link: str | None = None
) -> Iterator[Run]:
    """The text of a paragraph (or heading) as runs, with their emphasis and links."""
    name = element.get(f"{TEXT}style-name", "")
    bold = bold or name in styles.bold
    italic = italic or name in styles.italic
    if element.tag == f"{TEXT}a":
        link = element.get(f"{XLINK}href") or link
    yield Run(element.text or "", bold, italic, link)
    for child in element:
        if child.tag == f"{TEXT}s":
            yield Run(" " * min(int(child.get(f"{TEXT}c", "1") or 1), MAX_REPEAT), bold, italic, link)
        elif child.tag in (f"{TEXT}tab", f"{TEXT}line-break"):
            yield Run(" ", bold, italic, link)
        elif child.tag not in _SKIPPED:
            yield from runs(child, styles, bold, italic, link)
        yield Run(child.tail or "", bold, italic, link)


def plain(element: Element, styles: Styles) -> str:
    return "".join(run.text for run in runs(element, styles)).strip()


def read_odt(archive: Archive, writer: Writer) -> str | None:
    styles = Styles(archive)
    for element in children_of(archive.open("content.xml"), f"{OFFICE}text"):
        block(element, writer, styles)
    return meta_title(archive)


def block(element: Element, writer: Writer, styles: Styles, level: int = 0) -> None:
    """A block of a text or a text box: heading, paragraph, list, table or section."""
    tag = element.tag
    if tag == f"{TEXT}h":
        writer.heading(int(element.get(f"{TEXT}outline-level", "1") or 1), plain(element, styles))
    elif tag == f"{TEXT}p":
        writer.paragraph(runs(element, styles))
    elif tag == f"{TEXT}list":
        _list(element, writer, styles, level, element.get(f"{TEXT}style-name", "") in styles.numbered)
    elif tag == f"{TABLE}table":
        writer.table(table_rows(element, styles))
    elif tag in (f"{TEXT}section", f"{DRAW}frame", f"{DRAW}text-box", f"{TEXT}index-body"):
        for child in element:
            block(child, writer, styles, level)


def _list(element: Element, writer: Writer, styles: Styles, level: int, ordered: bool) -> None:
    for item in element:
        if item.tag not in (f"{TEXT}list-item", f"{TEXT}list-header"):
            continue
        for child in item:
            if child.tag in (f"{TEXT}p", f"{TEXT}h"):
                writer.item(runs(child, styles), level=level, ordered=ordered)
            elif child.tag == f"{TEXT}list":
                _list(
                    child,
                    writer,
                    styles,
                    level + 1,
                    ordered or child.get(f"{TEXT}style-name", "") in styles.numbered,
                )
            else:
                block(child, writer, styles, level + 1)


def table_rows(table: Element, styles: Styles) -> list[list[str]]:
    rows = []
    for row in table.iter(f"{TABLE}table-row"):
        cells = row_cells(row, styles)
        repeat = min(int(row.get(f"{TABLE}number-rows-repeated", "1") or 1), MAX_REPEAT)
        if any(cells):
            rows.extend([cells] * repeat)
    return rows


def row_cells(row: Element, styles: Styles) -> list[str]:
    """A row's cells, repeated cells written out (an empty run of them only before a full cell)."""
    cells: list[str] = []
    pending = 0
    for cell in row:
        if cell.tag not in (f"{TABLE}table-cell", f"{TABLE}covered-table-cell"):
            continue
        text = " ".join(plain(p, styles) for p in cell.iter() if p.tag in (f"{TEXT}p", f"{TEXT}h"))
        repeat = int(cell.get(f"{TABLE}number-columns-repeated", "1") or 1)
        if not text.strip():
            pending += repeat
            continue
        cells.extend([""] * min(pending, MAX_REPEAT))
        pending = 0
        cells.extend([text] * min(repeat, MAX_REPEAT))
    return cells


def read_odp(archive: Archive, writer: Writer, wanted: Callable[[int], list[int]]) -> tuple[str | None, int]:
    """Write the slides ``wanted(total)`` chooses; the title and the number of slides."""
    styles = Styles(archive)
    # Counted in one reading, read in another: a slide is cleared once it has been read.
    total = sum(1 for _ in _pages(archive))
    chosen = set(wanted(total))
    for number, page in enumerate(_pages(archive), start=1):
        if number in chosen:
            _slide(page, number, writer, styles)
    return meta_title(archive), total


def _pages(archive: Archive) -> Iterator[Element]:
    return (
        page
        for page in children_of(archive.open("content.xml"), f"{OFFICE}presentation")
        if page.tag == f"{DRAW}page"
    )


def _outline(frame: Element, writer: Writer, styles: Styles) -> None:
    """An outline placeholder's paragraphs are its bullets (as a PPTX body's are)."""
    for box in frame.iter(f"{DRAW}text-box"):
        for child in box:
            if child.tag == f"{TEXT}p":
                writer.item(runs(child, styles))
            else:
                block(child, writer, styles)


def _slide(page: Element, number: int, writer: Writer, styles: Styles) -> None:
    frames = [frame for frame in page if frame.tag == f"{DRAW}frame"]
    title = next((plain(f, styles) for f in frames if f.get(f"{PRESENTATION}class") == "title"), "")
    writer.part(number, f"Slide {number}" + (f": {title}" if title else ""))
    for frame in frames:
        kind = frame.get(f"{PRESENTATION}class")
        if kind == "outline":
            _outline(frame, writer, styles)
        elif kind not in ("title", "page-number", "footer", "date-time", "header"):
            block(frame, writer, styles)
    notes = page.find(f"{PRESENTATION}notes")
    texts = (
        []
        if notes is None
        else [
            plain(f, styles) for f in notes.iter(f"{DRAW}frame") if f.get(f"{PRESENTATION}class") == "notes"
        ]
    )
    if any(texts):
        writer.heading(3, "Notes")
        for text in texts:
            writer.block(text)
