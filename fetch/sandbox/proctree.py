"""The processes under one process, and their memory, read from ``/proc`` (Linux): what rendering
kills and measures of its render process's tree (fetch/render/renderer.py)."""

from __future__ import annotations

import os
from pathlib import Path

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def parents() -> dict[int, int]:
    """Every running process's parent, by pid."""
    found: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses; the fields after its last ")" do not.
        found[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def tree_pids(root: int) -> set[int]:
    """``root`` and its descendants. Not its session: Playwright starts Chromium in one of its own."""
    parent_of = parents()
    tree = {root}
    while grown := {pid for pid, parent in parent_of.items() if parent in tree} - tree:
        tree |= grown
    return tree


def tree_pss(root: int) -> int:
    """Memory of the render process and its descendants: the driver and the browser's tree.

    Proportional set sizes, so the pages Chromium's processes share are counted once in all.
    """
    return _pss(tree_pids(root))


def tree_over(root: int, limit: int) -> bool:
    """Whether ``tree_pss(root)`` is over ``limit``. The resident sizes are summed first: each is
    at least the proportional one, and reading them walks no process's memory (``smaps_rollup``
    does, taking CPU from the browser while it renders), so the PSS is read only past the limit."""
    pids = tree_pids(root)
    return _rss(pids) > limit and _pss(pids) > limit


def _rss(pids: set[int]) -> int:
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_SIZE
        except (OSError, IndexError, ValueError):
            continue
    return total


def _pss(pids: set[int]) -> int:
    total = 0
    for pid in pids:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
                break
    return total
