"""A Word document (DOCX, Office Open XML) as Markdown: headings by their style's outline level,
paragraphs, bulleted and numbered list items, tables, links, bold and italic.

The body is read one top-level element at a time (``archive.children_of``); the styles, the
numbering and the relationships are read first, whole, since they are small. Fields' results,
content controls and tracked insertions are read as text; deleted text is not. The sandbox child
runs this: standard library and lxml only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from fetch.documents.archive import Archive, Element, children_of, parse, unreadable
from fetch.documents.blocks import Run, Writer, is_on
from fetch.documents.ooxml import core_title, part_path, relationships

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_HEADING_NAME = re.compile(r"^heading\s*([1-9])$")
# Elements around blocks of the body: content controls, custom XML, tracked insertions.
_CONTAINERS = frozenset({f"{W}sdt", f"{W}sdtContent", f"{W}customXml", f"{W}ins", f"{W}smartTag"})
_SKIPPED = frozenset({f"{W}del", f"{W}moveFrom", f"{W}rPr", f"{W}pPr", f"{W}instrText", f"{W}delText"})


class _Styles:
    """Heading levels of paragraph styles, and which numbered lists are ordered."""

    def __init__(self, archive: Archive) -> None:
        self.levels: dict[str, int] = {}
        self.ordered: dict[tuple[str, str], bool] = {}
        if archive.has("word/styles.xml"):
            for style in parse(archive.open("word/styles.xml")).iter(f"{W}style"):
                level = _style_level(style)
                if level is not None:
                    self.levels[style.get(f"{W}styleId", "")] = level
        if archive.has("word/numbering.xml"):
            self._read_numbering(parse(archive.open("word/numbering.xml")))

    def _read_numbering(self, root: Element) -> None:
        formats: dict[str, dict[str, bool]] = {}
        for abstract in root.iter(f"{W}abstractNum"):
            formats[abstract.get(f"{W}abstractNumId", "")] = {
                level.get(f"{W}ilvl", "0"): _value(level.find(f"{W}numFmt")) not in ("bullet", "none", None)
                for level in abstract.iter(f"{W}lvl")
            }
        for num in root.iter(f"{W}num"):
            abstract_id = _value(num.find(f"{W}abstractNumId")) or ""
            for ilvl, ordered in formats.get(abstract_id, {}).items():
                self.ordered[(num.get(f"{W}numId", ""), ilvl)] = ordered


def _value(element: Element | None) -> str | None:
    return None if element is None else element.get(f"{W}val")


def _style_level(style: Element) -> int | None:
    name = (_value(style.find(f"{W}name")) or "").strip().lower()
    if name == "title":
        return 1
    if match := _HEADING_NAME.match(name):
        return int(match[1])
    outline = _value(style.find(f"{W}pPr/{W}outlineLvl"))
    return int(outline) + 1 if outline and outline.isdigit() and int(outline) < 9 else None


def read_docx(archive: Archive, writer: Writer) -> str | None:
    """Write the document's body into ``writer``; its title from the core properties."""
    main = part_path(archive, "word/document.xml", "officeDocument")
    if not archive.has(main):
        raise unreadable("the Word document has no body")
    links = relationships(archive, main)
    styles = _Styles(archive)
    for element in children_of(archive.open(main), f"{W}body"):
        _block(element, writer, styles, links)
    return core_title(archive)


def _block(element: Element, writer: Writer, styles: _Styles, links: dict[str, str]) -> None:
    if element.tag == f"{W}p":
        _paragraph(element, writer, styles, links)
    elif element.tag == f"{W}tbl":
        writer.table(_table_rows(element, writer, links))
    elif element.tag in _CONTAINERS:
        for child in element:
            _block(child, writer, styles, links)


def _paragraph(paragraph: Element, writer: Writer, styles: _Styles, links: dict[str, str]) -> None:
    runs = list(_runs(paragraph, links, None))
    properties = paragraph.find(f"{W}pPr")
    style = _value(properties.find(f"{W}pStyle")) if properties is not None else None
    outline = _value(properties.find(f"{W}outlineLvl")) if properties is not None else None
    level = styles.levels.get(style or "")
    if outline and outline.isdigit() and int(outline) < 9:
        level = int(outline) + 1
    if level is not None:
        writer.heading(level, "".join(run.text for run in runs))
        return
    numbering = properties.find(f"{W}numPr") if properties is not None else None
    if numbering is not None and _value(numbering.find(f"{W}numId")) not in (None, "0"):
        ilvl = _value(numbering.find(f"{W}ilvl")) or "0"
        ordered = styles.ordered.get((_value(numbering.find(f"{W}numId")) or "", ilvl), False)
        writer.item(runs, level=int(ilvl) if ilvl.isdigit() else 0, ordered=ordered)
        return
    writer.paragraph(runs)


def _runs(element: Element, links: dict[str, str], link: str | None) -> Iterator[Run]:
    for child in element:
        tag = child.tag
        if tag in _SKIPPED:
            continue
        if tag == f"{W}r":
            yield from _run(child, link)
        elif tag == f"{W}hyperlink":
            target = links.get(child.get(f"{R}id", ""))
            yield from _runs(child, links, target or link)
        elif tag in (f"{W}p", f"{W}tbl"):
            continue  # a text box's own paragraphs are read where they stand
        else:
            yield from _runs(child, links, link)


def _run(run: Element, link: str | None) -> Iterator[Run]:
    properties = run.find(f"{W}rPr")
    bold = italic = False
    if properties is not None:
        bold = _flag(properties.find(f"{W}b"))
        italic = _flag(properties.find(f"{W}i"))
    for child in run:
        if child.tag == f"{W}t":
            yield Run(child.text or "", bold, italic, link)
        elif child.tag in (f"{W}tab", f"{W}br", f"{W}cr"):
            yield Run(" ", bold, italic, link)
        elif child.tag == f"{W}noBreakHyphen":
            yield Run("-", bold, italic, link)


def _flag(element: Element | None) -> bool:
    return element is not None and is_on(element.get(f"{W}val"))


def _table_rows(table: Element, writer: Writer, links: dict[str, str]) -> list[list[str]]:
    rows = []
    for row in table.iter(f"{W}tr"):
        cells = []
        for cell in row.findall(f"{W}tc"):
            texts = [writer.inline(_runs(p, links, None)) for p in cell.iter(f"{W}p")]
            cells.append(" ".join(text for text in texts if text))
        rows.append(cells)
    return rows
