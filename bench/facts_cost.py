"""What page facts cost: CPU milliseconds per page of the sandbox child's HTML reading
(``fetch.html.reader.read_page``, in this process) on the article benchmark, without metadata
(its reader replaced by one that reads nothing), as served (metadata always), with
``structured: true`` and with ``tables: true``; and the sandbox child's start time and memory.

Each page is read in every variant in turn, the variants' order turning from page to page, and
all of it ``--rounds`` times; a variant's figure is the sum over pages of each page's median CPU
time (``time.process_time``), so that a machine busy with other work moves every variant alike.
``--baseline DIR`` names another checkout (e.g. the main branch) whose child is started beside
this one's, alternately, for the start time and memory figures.

    .venv/bin/python -m bench.facts_cost [--data DIR] [--rounds N] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import data
from fetch.documents.sniff import utf8_text
from fetch.html import reader

_LENGTH = struct.Struct(">I")
CHILD_MEMORY = 1 << 30


def pages(folder: Path) -> list[tuple[str, str]]:
    truth = json.loads((folder / "ground-truth.json").read_text())
    found = []
    for key, item in sorted(truth.items()):
        raw = gzip.decompress((folder / "html" / f"{key}.html.gz").read_bytes())
        found.append((utf8_text(raw, None).decode("utf-8"), item["url"]))
    return found


def _nothing_declared(tree: Any, url: str, *, structured: bool) -> dict[str, Any]:
    return {"metadata": {}}


VARIANTS: dict[str, dict[str, Any]] = {
    "no metadata": {},
    "metadata (as served)": {},
    "structured: true": {"structured": True},
    "tables: true": {"tables": True},
}


def read_one(markup: str, url: str, variant: str) -> float:
    """CPU seconds to read one page in ``variant``."""
    options = VARIANTS[variant]
    declared = reader.declared_facts
    if variant == "no metadata":
        reader.declared_facts = _nothing_declared
    try:
        started = time.process_time()
        reader.read_page(
            markup, url=url, markdown_mode=True, images=False, hidden_text="drop", rendered=False, **options
        )
        return time.process_time() - started
    finally:
        reader.declared_facts = declared


def cpu(corpus: list[tuple[str, str]], rounds: int) -> None:
    """Each page read in every variant in turn (the order turning from page to page), ``rounds``
    times; a variant's figure is the sum over pages of the page's median."""
    names = list(VARIANTS)
    seconds: dict[str, list[list[float]]] = {name: [[] for _ in corpus] for name in names}
    for markup, url in corpus[:20]:  # warm imports and caches
        read_one(markup, url, "metadata (as served)")
    for number in range(rounds):
        for index, (markup, url) in enumerate(corpus):
            turn = (number + index) % len(names)
            for name in names[turn:] + names[:turn]:
                seconds[name][index].append(read_one(markup, url, name))
        print(f"round {number + 1} of {rounds} done", flush=True)
    totals = {name: sum(statistics.median(runs) for runs in seconds[name]) for name in names}
    base = totals["no metadata"] / len(corpus) * 1000
    print(f"\nCPU ms per page, each page's median of {rounds} alternating runs, over {len(corpus)} pages:")
    for name in names:
        per_page = totals[name] / len(corpus) * 1000
        print(f"  {name:22} {per_page:7.2f} ms  ({(per_page / base - 1) * 100:+.1f}% on no metadata)")


def child_figures(checkout: Path, page: bytes, url: str) -> tuple[float, int, int]:
    """Start time (s), resident memory once ready and high-water mark after one page read with
    structured and tables (kB) of ``checkout``'s sandbox child."""
    started = time.monotonic()
    proc = subprocess.Popen(  # a checkout's own script, run by this interpreter
        [sys.executable, "-I", str(checkout / "fetch" / "sandbox" / "child.py"), str(CHILD_MEMORY)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={},
        cwd="/",
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        _read_frame(proc.stdout)
        ready = time.monotonic() - started
        rss = _status(proc.pid, "VmRSS")
        header = {
            "op": "html",
            "url": url,
            "markdown": True,
            "max_chars": 10_000_000,
            "structured": True,
            "tables": True,
        }
        for frame in (json.dumps(header).encode(), page):
            proc.stdin.write(_LENGTH.pack(len(frame)) + frame)
        proc.stdin.flush()
        _read_frame(proc.stdout)
        _read_frame(proc.stdout)
        return ready, rss, _status(proc.pid, "VmHWM")
    finally:
        proc.kill()
        proc.wait()


def _read_frame(stream: Any) -> bytes:
    (length,) = _LENGTH.unpack(stream.read(_LENGTH.size))
    return bytes(stream.read(length))


def _status(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    return 0


def children(corpus: list[tuple[str, str]], checkouts: dict[str, Path], times: int) -> None:
    largest = max(corpus, key=lambda item: len(item[0]))
    figures: dict[str, list[tuple[float, int, int]]] = {name: [] for name in checkouts}
    for _ in range(times):
        for name, checkout in checkouts.items():
            figures[name].append(child_figures(checkout, largest[0].encode(), largest[1]))
    print(f"\nsandbox child, median of {times} starts (then the largest page, {len(largest[0]) >> 10} KiB):")
    for name, runs in figures.items():
        ready = statistics.median(run[0] for run in runs)
        rss = statistics.median(run[1] for run in runs) / 1024
        peak = statistics.median(run[2] for run in runs) / 1024
        print(
            f"  {name:10} ready in {ready:.2f} s, {rss:.1f} MiB once ready, "
            f"{peak:.1f} MiB at most after the page"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    data.add_argument(parser)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another checkout whose sandbox child to compare")
    parser.add_argument("--starts", type=int, default=5, help="child starts per checkout")
    options = parser.parse_args()
    corpus = pages(data.articles(parser, options.data))
    checkouts = {"this": Path(__file__).resolve().parents[1]}
    if options.baseline is not None:
        checkouts["baseline"] = options.baseline
    measure: list[Callable[[], None]] = [
        lambda: children(corpus, checkouts, options.starts),
        lambda: cpu(corpus, options.rounds),
    ]
    for step in measure:
        step()


if __name__ == "__main__":
    main()
