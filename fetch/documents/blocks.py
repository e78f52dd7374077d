"""What every document reader writes: headings, paragraphs, list items, tables and emphasised or
linked runs of text, as Markdown (or plain text), and the parts of a document (its slides,
sheets or chapters) within the text's budget.

The sandbox child runs this: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from fetch.documents.archive import DocumentError

_SPACES = re.compile(r"[ \t\r\n\f\v]+")
_FOLLOWABLE = ("http://", "https://", "mailto:")
# Characters that would start Markdown markup inside a run of emphasis.
_MARKUP = re.compile(r"([*_`\[\]])")


@dataclass(frozen=True)
class Run:
    """A piece of a paragraph, with its emphasis and link target."""

    text: str
    bold: bool = False
    italic: bool = False
    link: str | None = None


@dataclass
class Budget:
    """The characters a document's text may still take; past them, ``too_long``."""

    limit: int
    used: int = 0

    def spend(self, chars: int) -> None:
        self.used += chars
        self.check(0)

    def left(self) -> int:
        return self.limit - self.used

    def check(self, more: int) -> None:
        """``too_long`` when ``more`` characters, yet to be written, would not fit."""
        if self.used + more > self.limit:
            raise DocumentError("too_long", f"the text is over {self.limit} characters")


@dataclass
class Part:
    """A slide, sheet or chapter (``number`` from 1), or the whole of an unpaged document."""

    number: int
    blocks: list[str] = field(default_factory=list)


@dataclass
class Writer:
    """Blocks written in Markdown (or plain text without ``markdown``), counted in ``budget``."""

    markdown: bool
    budget: Budget
    parts: list[Part] = field(default_factory=list)

    def part(self, number: int, heading: str) -> None:
        self.parts.append(Part(number))
        self.heading(2, heading)

    def block(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        if not self.parts:
            self.parts.append(Part(0))
        self.budget.spend(len(text) + 2)
        self.parts[-1].blocks.append(text)

    def heading(self, level: int, text: str) -> None:
        text = _SPACES.sub(" ", text).strip()
        if text:
            self.block(f"{'#' * min(max(level, 1), 6)} {text}" if self.markdown else text)

    def paragraph(self, runs: Iterable[Run]) -> None:
        self.block(self.inline(runs))

    def item(self, runs: Iterable[Run], *, level: int = 0, ordered: bool = False) -> None:
        text = self.inline(runs)
        if text:
            marker = "1." if ordered else "-"
            self.block(f"{'  ' * min(level, 8)}{marker} {text}")

    def table(self, rows: list[list[str]]) -> None:
        self.block(table_text(rows, markdown=self.markdown))

    def inline(self, runs: Iterable[Run]) -> str:
        """Runs as one line: neighbours alike merged, emphasis and links marked in Markdown."""
        merged: list[Run] = []
        for run in runs:
            if not run.text:
                continue
            last = merged[-1] if merged else None
            if last is not None and (last.bold, last.italic, last.link) == (run.bold, run.italic, run.link):
                merged[-1] = Run(last.text + run.text, run.bold, run.italic, run.link)
            else:
                merged.append(run)
        return _SPACES.sub(" ", "".join(self._marked(run) for run in merged)).strip()

    def _marked(self, run: Run) -> str:
        text = _SPACES.sub(" ", run.text)
        core = text.strip()
        if not self.markdown or not core:
            return text
        lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
        marks = ("**" if run.bold else "") + ("*" if run.italic else "")
        if marks:
            escaped = _MARKUP.sub(r"\\\1", core)
            core = f"{marks}{escaped}{marks[::-1]}"
        if run.link and run.link.startswith(_FOLLOWABLE) and not any(ch in run.link for ch in " ()\n"):
            core = f"[{core}]({run.link})"
        return f"{lead}{core}{trail}"


# Room kept in the budget for the line that says where a sheet's reading stopped.
CUT_NOTE_ROOM = 400


@dataclass
class TableSize:
    """The most characters a table's text takes (``table_text``): its cells' text with the bars
    escaped, each row's bars and its padding to the widest row, and the line under the header."""

    text: int = 0
    rows: int = 0
    width: int = 0

    def add_within(self, cells: list[str], room: int) -> bool:
        """Count ``cells`` as one more row if the table then fits in ``room`` characters; whether
        it did."""
        text, width = self.text + _cells_text(cells), max(self.width, len(cells))
        if text + (self.rows + 1) * (3 * width + 2) + 6 * width + 1 > room:
            return False
        self.text, self.rows, self.width = text, self.rows + 1, width
        return True


def _cells_text(cells: list[str]) -> int:
    return sum(len(cell) + cell.count("|") for cell in cells)


def sheet_heading(number: int, name: str) -> str:
    """A sheet's heading: its name, as its tab shows it (``Sheet N`` when it has none). Its number,
    which ``pages`` selects, is its place in the envelope's ``pages``."""
    return name.strip() or f"Sheet {number}"


def cut_note(writer: Writer, next_part: int | None) -> None:
    """The line that ends a sheet whose reading stopped at the budget: the rows that fit were
    read, the rest of the sheet was not, and (``next_part``) the sheets after it can be asked
    for by ``pages``."""
    after = f' To read the sheets after this one, ask for pages "{next_part}-".' if next_part else ""
    writer.block(
        f"[sift stopped reading here: a document's text is read up to {writer.budget.limit:,} "
        f"characters, and the rest of this sheet is past them.{after}]"
    )


def table_text(rows: list[list[str]], *, markdown: bool) -> str:
    """Rows as ``| cell | cell |`` lines, as wide as the widest row (a header line after the
    first row in Markdown); rows with no text left out."""
    kept = [[_SPACES.sub(" ", cell).strip() for cell in row] for row in rows]
    kept = [row for row in kept if any(row)]
    if not kept:
        return ""
    width = max(len(row) for row in kept)
    lines = [
        "| " + " | ".join(cell.replace("|", "\\|") for cell in row + [""] * (width - len(row))) + " |"
        for row in kept
    ]
    if markdown:
        lines.insert(1, "|" + " --- |" * width)
    return "\n".join(lines)


def is_on(value: str | None) -> bool:
    """An XML boolean attribute (OOXML's ``w:val``, ``b``, ``i``): absent means on."""
    return value is None or value.lower() not in ("0", "false", "off", "none")
