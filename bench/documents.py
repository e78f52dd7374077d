"""Benchmark: office documents and books read by sift against their known text, beside markitdown.

    nice -n 5 .venv/bin/python -m bench.documents [--markitdown PYTHON] [--rounds N]

A known text (``SOURCE`` below: headings, paragraphs with emphasis and links, bulleted and
numbered lists, a table) is written by pandoc, Debian's package, into DOCX, ODT, EPUB, PPTX and
RTF, into CSV by hand, and by LibreOffice (``soffice --convert-to``, Debian's
``libreoffice-calc-nogui`` and ``libreoffice-impress-nogui``) into XLSX and ODS from the CSV and
into ODP from the PPTX (without soffice, XLSX by openpyxl in markitdown's Python): tools other
than the readers, used here only, never at run time. Each
file is read by sift (``fetch.extract.extract``: the sniffing, the sandbox child and the reply,
as ``/v1/fetch`` reads a downloaded body) and, when ``--markitdown`` names a Python with
markitdown installed (``pip install 'markitdown[docx,xlsx,pptx]'`` in a virtual environment of
its own), by markitdown in that one process. For each: word-F1 of the text against the known
text (words lower-cased, link targets left out, counted as multisets), the structure kept
(headings, list items, table cells found of those written), and the median time of ``--rounds``
readings after one to warm up.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

SOURCE = """# Harbour Report

The harbour of *Northcape* handled **more cargo** than in any year before, says the
[port authority](https://port.example/report). Ferries ran on time on most days.

## Traffic

- Container ships grew by twelve percent
- Ferries carried four hundred thousand people
- Fishing boats held steady

## Steps for next year

1. Dredge the northern channel
2. Build a second crane
3. Train new pilots

## Figures

| Quarter | Ships | Tonnes |
|---|---|---|
| First | 120 | 45000 |
| Second | 135 | 51000 |
| Third | 150 | 56000 |

## Outlook

The council expects steady growth. A new terminal opens in spring, and the old pier becomes a
museum about the families who kept the light.
"""
_LINK_TARGET = re.compile(r"\]\([^)]*\)|https?://\S+")
_WORD = re.compile(r"\w+")
# A list item's marker is not a word of its text (a numbered list may be written "1." each time).
_MARKER = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s+", re.MULTILINE)
FORMATS = {
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "odt": "application/vnd.oasis.opendocument.text",
    "epub": "application/epub+zip",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "rtf": "application/rtf",
    "csv": "text/csv",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "odp": "application/vnd.oasis.opendocument.presentation",
}
# The table as a workbook, written by openpyxl in markitdown's Python (pandoc writes no sheets).
XLSX_SCRIPT = """
import sys
from openpyxl import Workbook
book = Workbook()
sheet = book.active
sheet.title = "Figures"
for line in sys.stdin.read().splitlines():
    sheet.append([int(c) if c.isdigit() else c for c in line.split(",")])
book.save(sys.argv[1])
"""
MARKITDOWN_SCRIPT = """
import json, sys, time
from markitdown import MarkItDown
md = MarkItDown()
rounds = int(sys.argv[1])
out = {}
for path in sys.argv[2:]:
    try:
        md.convert(path)
    except Exception as exc:  # a format markitdown does not read: left out of its rows
        print(f"{path}: {type(exc).__name__}", file=sys.stderr)
        continue
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        text = md.convert(path).text_content
        times.append(time.perf_counter() - started)
    out[path] = {"text": text, "seconds": sorted(times)[len(times) // 2]}
print(json.dumps(out))
"""


def words(text: str) -> Counter[str]:
    text = _MARKER.sub("", _LINK_TARGET.sub("]", text))
    return Counter(word.lower() for word in _WORD.findall(text))


def word_f1(text: str, known: str) -> float:
    found, expected = words(text), words(known)
    overlap = sum((found & expected).values())
    if not overlap:
        return 0.0
    precision, recall = overlap / sum(found.values()), overlap / sum(expected.values())
    return 2 * precision * recall / (precision + recall)


def structure(text: str) -> tuple[int, int, int]:
    """Headings, list items and table cells (with text) in Markdown ``text``."""
    lines = [line.strip() for line in text.splitlines()]
    headings = sum(1 for line in lines if re.match(r"#{1,6} ", line))
    items = sum(1 for line in lines if re.match(r"(?:[-*+]|\d+\.) ", line))
    cells = sum(
        1
        for line in lines
        if line.startswith("|") and not re.fullmatch(r"[|\s:-]+", line)
        for cell in line.strip("|").split("|")
        if cell.strip()
    )
    return headings, items, cells


def build(folder: Path, python: str | None = None) -> dict[str, Path]:
    """The source in each format, by pandoc; the table as CSV, and as XLSX and ODS (and the
    slides as ODP) by LibreOffice where ``soffice`` is installed, else as XLSX by openpyxl in
    ``python`` when given."""
    source = folder / "report.md"
    source.write_text(SOURCE)
    files = {}
    for kind in ("docx", "odt", "epub", "pptx", "rtf"):
        target = folder / f"report.{kind}"
        extra = ["--standalone"] if kind == "rtf" else []
        subprocess.run(["pandoc", str(source), "-o", str(target), *extra], check=True)
        files[kind] = target
    table = [
        row.strip("|").split("|") for row in SOURCE.splitlines() if row.startswith("| ") and "---" not in row
    ]
    csv = folder / "figures.csv"
    csv.write_text("\n".join(",".join(cell.strip() for cell in row) for row in table) + "\n")
    files["csv"] = csv
    if shutil.which("soffice"):
        for source_file, kind in ((csv, "xlsx"), (csv, "ods"), (files["pptx"], "odp")):
            command = [
                "soffice",
                "--headless",
                "--convert-to",
                kind,
                "--outdir",
                str(folder),
                str(source_file),
            ]
            subprocess.run(command, check=True, capture_output=True, timeout=300)
            files[kind] = folder / f"{source_file.stem}.{kind}"
    elif python:
        xlsx = folder / "figures.xlsx"
        subprocess.run([python, "-c", XLSX_SCRIPT, str(xlsx)], input=csv.read_text(), text=True, check=True)
        files["xlsx"] = xlsx
    return files


def read_by_sift(files: dict[str, Path], rounds: int) -> dict[str, dict[str, object]]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")
    import django

    django.setup()
    from fetch.extract import extract
    from fetch.targets import TargetOptions

    results: dict[str, dict[str, object]] = {}
    for kind, path in files.items():
        body = path.read_bytes()

        def read(body: bytes = body, kind: str = kind, path: Path = path) -> str:
            url = f"https://files.example/{path.name}"
            return extract(
                body, declared_type=FORMATS[kind], charset=None, url=url, options=TargetOptions()
            ).content

        read()
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            text = read()
            times.append(time.perf_counter() - started)
        results[kind] = {"text": text, "seconds": statistics.median(times)}
    return results


def read_by_markitdown(python: str, files: dict[str, Path], rounds: int) -> dict[str, dict[str, object]]:
    paths = [str(path) for path in files.values()]
    command = [python, "-c", MARKITDOWN_SCRIPT, str(rounds), *paths]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"markitdown failed: {done.stderr[-500:]}", file=sys.stderr)
        return {}
    by_path = json.loads(done.stdout)
    return {kind: by_path[str(path)] for kind, path in files.items() if str(path) in by_path}


def known_text(kind: str) -> str:
    """What a person reading the file sees: the source; the table alone for CSV; the table under
    its tab's name for a workbook (each writer names the sheet after the CSV, ``figures``)."""
    table = "\n".join(line for line in SOURCE.splitlines() if line.startswith("| ") and "---" not in line)
    if kind == "csv":
        return table
    if kind in ("xlsx", "ods"):
        return f"## Figures\n\n{table}"
    return SOURCE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markitdown", help="a Python with markitdown installed")
    parser.add_argument("--rounds", type=int, default=20)
    arguments = parser.parse_args()
    if shutil.which("pandoc") is None:
        sys.exit("pandoc is needed to write the documents: apt-get install pandoc")
    with tempfile.TemporaryDirectory() as folder:
        files = build(Path(folder), arguments.markitdown)
        sift = read_by_sift(files, arguments.rounds)
        other = (
            read_by_markitdown(arguments.markitdown, files, arguments.rounds) if arguments.markitdown else {}
        )
    print(f"{'format':6} {'reader':10} {'word-F1':>7} {'headings':>8} {'items':>5} {'cells':>5} {'ms':>7}")
    for kind in files:
        expected = structure(known_text(kind))
        for reader, results in (("sift", sift), ("markitdown", other)):
            if kind not in results:
                continue
            text = str(results[kind]["text"])
            found = structure(text)
            kept = [f"{min(f, e)}/{e}" for f, e in zip(found, expected, strict=True)]
            seconds = float(results[kind]["seconds"])  # type: ignore[arg-type]
            print(
                f"{kind:6} {reader:10} {word_f1(text, known_text(kind)):7.3f} {kept[0]:>8} {kept[1]:>5} "
                f"{kept[2]:>5} {seconds * 1000:7.1f}"
            )


if __name__ == "__main__":
    main()
