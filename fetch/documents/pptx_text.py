"""Slides (PPTX, Office Open XML) as Markdown: each slide a part headed by its number and title,
its text boxes as paragraphs (a body placeholder's paragraphs as list items), its tables, and
its speaker notes.

Only the slides asked for are read. The sandbox child runs this: standard library and
lxml only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fetch.documents.archive import Archive, Element, parse, unreadable
from fetch.documents.blocks import Run, Writer, is_on
from fetch.documents.ooxml import core_title, part_path, related, relationships

P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_TITLES = frozenset({"title", "ctrTitle"})
# Placeholders whose text is furniture, not the slide's content.
_FURNITURE = frozenset({"dt", "ftr", "sldNum", "hdr", "sldImg"})


def slide_paths(archive: Archive) -> list[str]:
    """The slides in the presentation's order."""
    main = part_path(archive, "ppt/presentation.xml", "officeDocument")
    if not archive.has(main):
        raise unreadable("the presentation has no slide list")
    links = relationships(archive, main)
    listed = parse(archive.open(main)).find(f"{P}sldIdLst")
    ids = [] if listed is None else [slide.get(f"{R}id", "") for slide in listed]
    return [links[rid] for rid in ids if rid in links and archive.has(links[rid])]


def read_pptx(archive: Archive, writer: Writer, wanted: Callable[[int], list[int]]) -> tuple[str | None, int]:
    """Write the slides ``wanted(total)`` chooses; the title and the number of slides."""
    slides = slide_paths(archive)
    for number in wanted(len(slides)):
        _slide(archive, slides[number - 1], number, writer)
    return core_title(archive), len(slides)


def _slide(archive: Archive, path: str, number: int, writer: Writer) -> None:
    links = relationships(archive, path)
    tree = parse(archive.open(path)).find(f"{P}cSld/{P}spTree")
    shapes = list(_shapes(tree)) if tree is not None else []
    title = next((_plain(shape) for shape, kind in shapes if kind in _TITLES), "")
    writer.part(number, f"Slide {number}" + (f": {title}" if title else ""))
    for shape, kind in shapes:
        if kind in _TITLES or kind in _FURNITURE:
            continue
        _shape_text(shape, kind, writer, links)
    notes = related(archive, path, "notesSlide")
    if notes and archive.has(notes[0]):
        _notes(archive, notes[0], writer)


def _shapes(tree: Element) -> Iterator[tuple[Element, str | None]]:
    """Each shape or table frame of a shape tree, groups opened, with its placeholder type
    (``body`` for a placeholder that names none, None for a shape that is no placeholder)."""
    for shape in tree:
        if shape.tag == f"{P}grpSp":
            yield from _shapes(shape)
        elif shape.tag in (f"{P}sp", f"{P}graphicFrame"):
            placeholder = shape.find(f"*/{P}nvPr/{P}ph")
            kind = None if placeholder is None else placeholder.get("type", "body")
            yield shape, kind


def _shape_text(shape: Element, kind: str | None, writer: Writer, links: dict[str, str]) -> None:
    table = shape.find(f".//{A}tbl")
    if table is not None:
        rows = [[_plain(cell) for cell in row.findall(f"{A}tc")] for row in table.findall(f"{A}tr")]
        writer.table(rows)
        return
    body = shape.find(f"{P}txBody")
    if body is None:
        return
    for paragraph in body.findall(f"{A}p"):
        runs = list(_runs(paragraph, links))
        properties = paragraph.find(f"{A}pPr")
        level = int(properties.get("lvl", "0")) if properties is not None else 0
        bulleted = (
            properties is not None
            and properties.find(f"{A}buNone") is None
            and (properties.find(f"{A}buChar") is not None or properties.find(f"{A}buAutoNum") is not None)
        )
        if kind in ("body", "obj") or bulleted:
            ordered = properties is not None and properties.find(f"{A}buAutoNum") is not None
            writer.item(runs, level=level, ordered=ordered)
        else:
            writer.paragraph(runs)


def _runs(paragraph: Element, links: dict[str, str]) -> Iterator[Run]:
    for child in paragraph:
        if child.tag in (f"{A}r", f"{A}fld"):
            properties = child.find(f"{A}rPr")
            bold = properties is not None and is_on(properties.get("b", "0"))
            italic = properties is not None and is_on(properties.get("i", "0"))
            click = properties.find(f"{A}hlinkClick") if properties is not None else None
            link = links.get(click.get(f"{R}id", "")) if click is not None else None
            text = child.find(f"{A}t")
            yield Run(text.text or "" if text is not None else "", bold, italic, link)
        elif child.tag == f"{A}br":
            yield Run(" ")


def _plain(element: Element) -> str:
    """The text of a shape or cell, its paragraphs joined by spaces."""
    return " ".join("".join(t.text or "" for t in p.iter(f"{A}t")) for p in element.iter(f"{A}p")).strip()


def _notes(archive: Archive, path: str, writer: Writer) -> None:
    tree = parse(archive.open(path)).find(f"{P}cSld/{P}spTree")
    if tree is None:
        return
    texts = [
        _plain(shape)
        for shape, kind in _shapes(tree)
        if kind == "body" and shape.find(f"{P}txBody") is not None
    ]
    if any(texts):
        writer.heading(3, "Notes")
        for text in texts:
            writer.block(text)
