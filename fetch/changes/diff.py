"""A unified diff of two texts' lines, with the lines added and removed counted over the whole
diff and the diff itself cut, at a line end, to the size an answer's content may have."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

CONTEXT_LINES = 3
HEADER_LINES = 2  # the "--- previous" and "+++ current" lines before the first hunk


@dataclass(frozen=True)
class Diff:
    text: str
    added: int
    removed: int
    truncated: bool


def unified(previous: str, current: str, *, most_chars: int) -> Diff:
    """``previous`` → ``current`` as a unified diff of lines; ``text`` at most ``most_chars``."""
    lines = list(
        difflib.unified_diff(
            previous.splitlines(),
            current.splitlines(),
            fromfile="previous",
            tofile="current",
            lineterm="",
            n=CONTEXT_LINES,
        )
    )
    body = lines[HEADER_LINES:]
    added = sum(1 for line in body if line.startswith("+"))
    removed = sum(1 for line in body if line.startswith("-"))
    text = "\n".join(lines)
    if len(text) <= most_chars:
        return Diff(text, added, removed, truncated=False)
    cut = text.rfind("\n", 0, most_chars + 1)
    return Diff(text[: cut if cut > 0 else most_chars], added, removed, truncated=True)
