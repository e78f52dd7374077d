"""Benchmark PDF text through the sandbox against poppler's ``pdftotext``, and peak memory.

The PDF is generated here: 200 A4 pages of 46 lines of Helvetica text each (deterministic
pseudo-words), Flate-compressed content streams, written by ``tests/fixtures/pdf_writer.py`` (a
hand-written PDF writer of ~50 lines). Needs ``pdftotext`` (Debian: apt-get install poppler-utils).

Sift is timed warm twice: with the one child its first call started, then with every child of
the pool started (the PDF is then shared out between them). Each sift reading is followed by a
pdftotext reading, so both see the same load; the ratio line gives the median of the rounds'
ratios, and CPU time per page (the children's, from ``/proc``, and pdftotext's) shows what each
reader costs whatever the load.

Peak RSS is measured in fresh processes, one per document: the web/worker process (ru_maxrss)
and the sandbox child that read the PDF (VmHWM), for that PDF and for a generated 20 MB HTML
page run through ``extract`` with a grep for one line (so that the over-400,000-characters rule
does not stop it early).

    .venv/bin/python -m bench.pdf [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")

from bench.harness import REPO
from bench.stats import median
from tests.fixtures.pdf_writer import build_pdf

PAGES = 200
HTML_BYTES = 20_000_000


def make_pdf(pages: int = PAGES) -> bytes:
    rng = random.Random(7)
    syllables = ["ka", "lo", "mi", "ne", "sor", "ta", "vel", "ur", "pe", "qua", "ri", "den"]

    def word() -> str:
        return "".join(rng.choice(syllables) for _ in range(rng.randint(1, 4)))

    def line() -> str:
        return " ".join(word() for _ in range(12))

    return build_pdf([[line() for _ in range(46)] for _ in range(pages)], compress=True)


def make_html(size: int = HTML_BYTES) -> bytes:
    nav = (
        "<nav><ul>" + "".join(f"<li><a href='/s{i}'>Section {i}</a></li>" for i in range(30)) + "</ul></nav>"
    )
    post = (
        "<div class='post'><h2>Notes from the harbour</h2><p>The ferry left at dawn and the lighthouse "
        "keeper logged the weather, the tide and the ships that passed the cape that morning.</p>"
        "<p>Visitors asked about opening hours; the museum opens at ten and closes at five.</p></div>\n"
    )
    head = f"<!DOCTYPE html><html lang='en'><head><title>Big page</title></head><body>{nav}<main>"
    count = (size - len(head)) // len(post)
    middle = "<p>The keeper's log ends here.</p>"
    return (head + post * (count // 2) + middle + post * (count // 2) + "</main></body></html>").encode()


@dataclass
class Reader:
    """Wall seconds of each reading of the PDF by one reader, and the CPU time they took."""

    seconds: list[float] = field(default_factory=list)
    cpu_seconds: float = 0.0
    characters: int = 0

    @property
    def pages_per_second(self) -> float:
        return PAGES * len(self.seconds) / sum(self.seconds)

    @property
    def cpu_ms_per_page(self) -> float:
        return self.cpu_seconds * 1000 / (PAGES * len(self.seconds))


def children_cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU time the sandbox children ``pids`` have used so far."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def read_with_sift(pdf: bytes, reader: Reader) -> None:
    from fetch.documents.pdf_text import pdf_text
    from fetch.sandbox.pool import get_sandbox

    pids = get_sandbox().pids()
    cpu = children_cpu_seconds(pids) + time.process_time()
    started = time.perf_counter()
    result = pdf_text(pdf, None, max_chars=50_000_000)
    reader.seconds.append(time.perf_counter() - started)
    reader.cpu_seconds += children_cpu_seconds(pids) + time.process_time() - cpu
    reader.characters = len(result.content)


def read_with_pdftotext(path: str, reader: Reader) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(["pdftotext", path, "-"], check=True, capture_output=True).stdout
    reader.seconds.append(time.perf_counter() - started)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reader.cpu_seconds += after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    reader.characters = len(out.decode())


def median_ratio(sift: Reader, poppler: Reader) -> float:
    """Median over rounds of pdftotext's seconds over sift's: both read in turn, so a machine
    busy with something else slows both alike."""
    return median(p / s for s, p in zip(sift.seconds, poppler.seconds, strict=True))


def bench_readers(pdf: bytes, rounds: int) -> dict[str, Reader]:
    """Sift's first call (it starts a child), then sift warm with the one child that call started,
    then with every child of the pool started (as after ``warm_up``; a PDF this big is then read
    by all of them at once); pdftotext reads the file in turn with each warm round."""
    from fetch.sandbox.pool import get_sandbox

    readers = {name: Reader() for name in ("cold", "one", "every", "poppler one", "poppler every")}
    read_with_sift(pdf, readers["cold"])
    with tempfile.NamedTemporaryFile(suffix=".pdf") as handle:
        handle.write(pdf)
        handle.flush()
        for phase in ("one", "every"):
            if phase == "every":
                get_sandbox().warm_up()
                read_with_sift(pdf, Reader())  # each new child's first PDF is slower: not counted
            for _ in range(rounds):
                read_with_sift(pdf, readers[phase])
                if shutil.which("pdftotext"):
                    read_with_pdftotext(handle.name, readers[f"poppler {phase}"])
    return readers


def child_peak_kib() -> int:
    from fetch.sandbox.pool import get_sandbox

    reply, _ = get_sandbox().run(
        "ping", {}, b"", cpu_seconds=5, wall_seconds=10, subject="ping", hint="", max_reply_bytes=1024
    )
    status = Path(f"/proc/{reply['pid']}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))


def rss_of(document: str) -> None:
    """Run in a fresh process: read one document, print its peak RSS figures (KiB) and seconds."""
    from fetch.errors import FetchError
    from fetch.extract import extract
    from fetch.targets import TargetOptions

    body = make_pdf() if document == "pdf" else make_html()
    declared = "application/pdf" if document == "pdf" else "text/html"
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    try:
        result = extract(
            body,
            declared_type=declared,
            charset=None,
            url="https://bench.example/",
            options=TargetOptions(grep="log ends"),
        )
        outcome = f"ok, {result.matches} matching lines"
    except FetchError as exc:
        outcome = f"{exc.outcome}: {exc.message}"
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child = child_peak_kib() if document == "pdf" else 0
    print(f"{len(body)}\t{baseline}\t{peak}\t{child}\t{elapsed:.2f}\t{outcome}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rss-of", choices=["pdf", "html"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_of:
        rss_of(args.rss_of)
        return
    pdf = make_pdf()
    print(f"generated PDF: {PAGES} pages, {len(pdf) / 1e6:.2f} MB\n")
    readers = bench_readers(pdf, args.rounds)
    print("| reader                                   | pages/s | CPU ms/page | characters |")
    print("|------------------------------------------|--------:|------------:|-----------:|")
    rows = [
        ("sift sandbox (first call, cold)", "cold"),
        ("sift sandbox (warm, one child started)", "one"),
        ("sift sandbox (warm, every child started)", "every"),
        ("pdftotext (poppler), beside one child", "poppler one"),
        ("pdftotext (poppler), beside every child", "poppler every"),
    ]
    for label, name in rows:
        reader = readers[name]
        if reader.seconds:
            # The first call's child starts inside it: its CPU time is not the reading's.
            cpu_ms = "" if name == "cold" else f"{reader.cpu_ms_per_page:.2f}"
            rate = reader.pages_per_second
            print(f"| {label:<40} | {rate:>7.0f} | {cpu_ms:>11} | {reader.characters:>10} |")
    if readers["poppler one"].seconds:
        one = median_ratio(readers["one"], readers["poppler one"])
        every = median_ratio(readers["every"], readers["poppler every"])
        cpu = readers["poppler one"].cpu_ms_per_page / readers["one"].cpu_ms_per_page
        print(
            f"\nratio sift warm sandbox / pdftotext, pages/s: {every:.2f} (one child: {one:.2f});"
            f" CPU time per page, pdftotext / sift: {cpu:.2f}"
        )
    else:
        print("\npdftotext (poppler) is not installed: apt-get install poppler-utils")
    print(
        "\n| document (grep) | size MB | process RSS before | process peak RSS | child peak RSS "
        "| seconds | outcome |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    for document in ("html", "pdf"):
        line = (
            subprocess.run(
                [sys.executable, "-m", "bench.pdf", "--rss-of", document],
                check=True,
                capture_output=True,
                text=True,
                cwd=REPO,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        size, before, peak, child, seconds, outcome = line.split("\t")
        child_mb = f"{int(child) / 1024:.0f} MB" if int(child) else "-"
        print(
            f"| {document} | {int(size) / 1e6:.1f} | {int(before) / 1024:.0f} MB | {int(peak) / 1024:.0f} MB "
            f"| {child_mb} | {seconds} | {outcome} |"
        )


if __name__ == "__main__":
    main()
