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
readings after one to warm up. With ``--fetch``, each file is also fetched through ``GET
/v1/fetch`` from the Procfile's web process (gunicorn, a SQLite database in a temporary directory,
the files served on loopback, each round under a path of its own so that every fetch downloads
and reads: no cache hit), timed at the client; the ratio to markitdown's time is printed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


class _Files(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, files: dict[str, Path]) -> None:
        super().__init__(("127.0.0.1", 0), _FileHandler)
        self.files = {path.name: (path.read_bytes(), FORMATS[kind]) for kind, path in files.items()}


class _FileHandler(BaseHTTPRequestHandler):
    """``GET /<round>/<file name>``: the file, with its media type, whatever the round."""

    server: _Files
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body, media_type = self.server.files.get(self.path.rsplit("/", 1)[-1], (b"", ""))
        if not body:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def served(files: dict[str, Path]) -> Iterator[int]:
    server = _Files(files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def read_through_fetch(files: dict[str, Path], rounds: int) -> dict[str, float]:
    """Median seconds of ``GET /v1/fetch`` per file, from the Procfile's web process."""
    from bench import harness, submit

    with tempfile.TemporaryDirectory(prefix="sift-bench-documents-") as tmp, served(files) as port:
        database = f"sqlite:///{tmp}/bench.sqlite3"
        submit.manage(["migrate", "--verbosity", "0"], database)
        [key] = submit.issue_keys(1, database)
        env = harness.service_env(
            database,
            Path(tmp) / "metrics",
            SIFT_FETCH_ALLOW_CIDRS="127.0.0.0/8",
            SIFT_FETCH_ONLY_ALLOWED="true",
            SIFT_FETCH_ALLOW_PORTS=str(port),
        )
        with submit.gunicorn(env, Path(tmp), "documents") as server:
            connection = http.client.HTTPConnection(harness.LOOPBACK, server.port, timeout=60)
            times: dict[str, list[float]] = {kind: [] for kind in files}
            for number in range(rounds + 1):  # the first round warms the sandbox children up
                for kind, path in files.items():
                    query = urllib.parse.urlencode({"url": f"http://127.0.0.1:{port}/{number}/{path.name}"})
                    started = time.perf_counter()
                    connection.request(
                        "GET", f"/v1/fetch?{query}", headers={"Authorization": f"Bearer {key}"}
                    )
                    response = connection.getresponse()
                    body = response.read()
                    if response.status != 200:
                        raise RuntimeError(f"{path.name}: {response.status} {body[:300]!r}")
                    if number:
                        times[kind].append(time.perf_counter() - started)
            connection.close()
    return {kind: statistics.median(seconds) for kind, seconds in times.items()}


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
    parser.add_argument("--fetch", action="store_true", help="also time each file through GET /v1/fetch")
    arguments = parser.parse_args()
    if shutil.which("pandoc") is None:
        sys.exit("pandoc is needed to write the documents: apt-get install pandoc")
    with tempfile.TemporaryDirectory() as folder:
        files = build(Path(folder), arguments.markitdown)
        sift = read_by_sift(files, arguments.rounds)
        other = (
            read_by_markitdown(arguments.markitdown, files, arguments.rounds) if arguments.markitdown else {}
        )
        fetched = read_through_fetch(files, arguments.rounds) if arguments.fetch else {}
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
        if kind in fetched:
            direct = float(other[kind]["seconds"]) if kind in other else None  # type: ignore[arg-type]
            ratio = f"  {fetched[kind] / direct:.2f}x markitdown" if direct else ""
            print(f"{kind:6} {'/v1/fetch':10} {'':>29} {fetched[kind] * 1000:7.1f}{ratio}")


if __name__ == "__main__":
    main()
