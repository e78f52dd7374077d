"""Benchmark: a 20 MB workbook of text read through the sandbox child, its peak memory and time.

    nice -n 5 .venv/bin/python -m bench.large_workbook [--rows N]

A workbook of two sheets, each row four cells of six words drawn from 3,000 made-up ones (so that
it compresses as prose does, about 4:1), is written by the test suite's office writer (no other
tool) and read by ``fetch.extract.extract`` as ``/v1/fetch`` reads a downloaded body: the sniffing,
the sandbox child under its memory limit and CPU budget, and the reply. Its text passes the
readable limit (10 million characters), so the reading stops at the last whole row that fits and
the answer comes in slices. Printed: the file's size, the seconds, the characters read, the
sheets read, the last line, and the child's peak resident memory (``VmHWM``) against its limit.
Run it in a fresh process: the child is started for it.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path


def workbook(rows: int) -> bytes:
    from tests.fixtures import office_writer

    draw = random.Random(1)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(draw.choice(letters) for _ in range(draw.randint(3, 9))) for _ in range(3000)]
    cells = [[" ".join(draw.choice(vocabulary) for _ in range(6)) for _ in range(4)] for _ in range(rows)]
    return office_writer.xlsx([("Ledger", cells[: rows // 2]), ("Archive", cells[rows // 2 :])])


def child_peaks_kib() -> list[int]:
    from fetch.sandbox.pool import get_sandbox

    peaks = []
    for pid in get_sandbox().pids():
        status = Path(f"/proc/{pid}/status").read_text()
        peaks.append(int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))))
    return peaks


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=205_000, help="rows in all (205,000: about 20 MB)")
    arguments = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")
    import django

    django.setup()
    from fetch.extract import extract
    from fetch.sandbox.pool import SANDBOX_MEMORY_BYTES, get_sandbox
    from fetch.targets import TargetOptions

    body = workbook(arguments.rows)
    get_sandbox().warm_up(1)
    idle = max(child_peaks_kib())
    pid = get_sandbox().pids()[0]
    cpu = _cpu_seconds(pid)
    started = time.perf_counter()
    read = extract(
        body,
        declared_type="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        charset=None,
        url="https://files.example/ledger.xlsx",
        options=TargetOptions(),
    )
    seconds = time.perf_counter() - started
    cpu = _cpu_seconds(pid) - cpu
    print(f"workbook: {len(body) / 1e6:.1f} MB, {arguments.rows} rows in 2 sheets")
    print(f"read in {seconds:.1f} s ({cpu:.1f} s of the child's CPU): {len(read.content):,} characters")
    print(f"sheets read: {read.pages} of {read.pages_total}")
    print(f"last line: {read.content.rsplit(chr(10), 1)[-1][:160]}")
    print(
        f"child peak {max(child_peaks_kib()) / 1024:.0f} MiB (idle {idle / 1024:.0f} MiB), "
        f"limit {SANDBOX_MEMORY_BYTES / (1 << 20):.0f} MiB of address space"
    )


if __name__ == "__main__":
    main()
