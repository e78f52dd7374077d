"""CPU use from /proc, to tell the benchmark's own work from other programs' on the same machine.

Figures are in cores: CPU seconds used over the wall-clock seconds of a window.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Above this many cores of other work during a window, another program competed with the
# benchmark and its figures are not to be quoted. A quiet machine reads a few hundredths either
# side of zero: PostgreSQL's background processes, short-lived connections and the coarse
# accounting of /proc.
BUSY_MACHINE_CORES = 0.25


@dataclass(frozen=True)
class ProcessCpu:
    ppid: int
    name: str
    seconds: float


def processes() -> dict[int, ProcessCpu]:
    """Every process on the machine: its parent, its name and the CPU it has used so far."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # it ended since the listing
            name, rest = stat.split(" (", 1)[1].rsplit(") ", 1)
            fields = rest.split()
            seconds = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime
            found[int(entry.name)] = ProcessCpu(int(fields[1]), name, seconds)
    return found


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (not idle, not waiting for I/O) since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    return (sum(fields) - fields[3] - fields[4]) / CLOCK_TICKS


def children(pid: int, table: dict[int, ProcessCpu] | None = None) -> list[int]:
    table = processes() if table is None else table
    return [child for child, info in table.items() if info.ppid == pid]


def descendants(pid: int, table: dict[int, ProcessCpu] | None = None) -> list[int]:
    table = processes() if table is None else table
    found, frontier = [], {pid}
    while frontier:
        generation = [child for child, info in table.items() if info.ppid in frontier]
        found += generation
        frontier = set(generation)
    return found


def bench_processes(roots: list[int], table: dict[int, ProcessCpu]) -> list[int]:
    """This process and the process trees under ``roots``: whose CPU is the benchmark's own."""
    return [os.getpid(), *roots, *(pid for root in roots for pid in descendants(root, table))]


@dataclass(frozen=True)
class CpuSnapshot:
    machine: float
    processes: dict[int, ProcessCpu]

    @classmethod
    def take(cls) -> CpuSnapshot:
        return cls(machine_busy_seconds(), processes())


def process_cores(before: CpuSnapshot, after: CpuSnapshot, pid: int, seconds: float) -> float:
    """Cores ``pid`` used between the snapshots: from zero if it started since, none if it ended."""
    start = before.processes.get(pid)
    end = after.processes.get(pid, start)
    return ((end.seconds if end else 0) - (start.seconds if start else 0)) / seconds


def cores_by_group(
    before: CpuSnapshot, after: CpuSnapshot, groups: dict[str, list[int]], seconds: float
) -> dict[str, float]:
    """Cores each group of processes used between the snapshots, then ``other``: the rest of the machine."""
    cores = {
        name: sum(process_cores(before, after, pid, seconds) for pid in set(pids))
        for name, pids in groups.items()
    }
    cores["other"] = (after.machine - before.machine) / seconds - sum(cores.values())
    return cores
