"""The pages a request's ``pages`` ranges choose of a document of ``total`` pages (PDF pages,
slides, sheets, chapters), in the sandbox child; standard library only."""

from __future__ import annotations


def pages_wanted(ranges: list[list[int | None]] | None, total: int) -> list[int] | None:
    """Sorted, de-duplicated 1-based page numbers, or None when a range leaves the document."""
    if ranges is None:
        return list(range(1, total + 1))
    wanted: set[int] = set()
    for start, end in ranges:
        assert start is not None
        last = total if end is None else end
        if start > total or last > total:
            return None
        wanted.update(range(start, last + 1))
    return sorted(wanted)
