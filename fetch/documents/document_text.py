"""Office documents, books, feeds, CSV and RTF read into Markdown inside the sandbox
(``formats.read_document`` is what the child runs), their failures turned into outcomes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fetch.errors import FetchError
from fetch.outcomes import Outcome
from fetch.sandbox.pool import get_sandbox
from fetch.targets import PageRange

# CPU seconds a document may take: a base, and more for a bigger file.
DOCUMENT_CPU_SECONDS = 10.0
DOCUMENT_CPU_SECONDS_PER_MIB = 2.0
TIME_HINT = (
    'The document is too heavy to read whole: ask for fewer pages (slides, sheets, chapters), e.g. "1-3".'
)
MEMORY_HINT = (
    "The document needs more memory than its reader has: ask for fewer pages (slides, sheets, "
    'chapters), e.g. "1-3", or send a smaller document.'
)
PAGED_KINDS = frozenset({"xlsx", "pptx", "ods", "odp", "epub"})


@dataclass(frozen=True)
class DocumentText:
    content: str
    kind: str
    media_type: str
    title: str | None
    pages_total: int | None
    pages: list[int] | None
    # Where each part (slide, sheet, chapter) starts in ``content``, and its number.
    part_starts: list[tuple[int, int]]
    entries: list[dict[str, Any]] | None


def document_text(
    kind: str, payload: bytes, page_ranges: tuple[PageRange, ...] | None, *, markdown: bool, max_chars: int
) -> DocumentText:
    """``payload`` read as ``kind`` (``zip``: whichever office document or book it is).

    Raises ``FetchError``: ``invalid_request`` for pages asked of a document without pages or
    past its end, ``too_long`` past ``max_chars`` or the archive's bounds, ``encrypted``,
    ``unreadable``, ``unsupported`` (a zip archive of anything else), ``filter_timeout``,
    ``memory_limit``.
    """
    cpu_seconds = DOCUMENT_CPU_SECONDS + DOCUMENT_CPU_SECONDS_PER_MIB * len(payload) / (1 << 20)
    header = {
        "kind": kind,
        "ranges": [list(r) for r in page_ranges] if page_ranges else None,
        "max_chars": max_chars,
        "markdown": markdown,
    }
    reply, data = get_sandbox().run(
        "document",
        header,
        payload,
        cpu_seconds=cpu_seconds,
        wall_seconds=cpu_seconds * 1.5 + 2,
        subject="the document reader",
        hint=TIME_HINT,
        memory_hint=MEMORY_HINT,
        max_reply_bytes=max_chars * 4 + (1 << 20),
    )
    _raise_for(reply, max_chars)
    read_kind = str(reply["kind"])
    if page_ranges is not None and read_kind not in PAGED_KINDS:
        raise FetchError(
            Outcome.INVALID_REQUEST,
            f"pages applies to PDFs, slides, sheets and chapters, and this document is {read_kind}",
            "Leave pages out for this document; use grep or question to narrow it.",
        )
    total = reply.get("pages_total")
    return DocumentText(
        content=data.decode("utf-8", "replace"),
        kind=read_kind,
        media_type=str(reply["media_type"]),
        title=str(reply["title"]).strip() or None if reply.get("title") else None,
        pages_total=int(total) if total is not None else None,
        pages=[int(n) for n in reply["pages"]] if total is not None else None,
        part_starts=[(int(at), int(number)) for at, number in reply.get("parts", [])],
        entries=reply.get("entries"),
    )


def _raise_for(reply: dict[str, Any], max_chars: int) -> None:
    error = reply.get("error")
    if error is None:
        return
    message = str(reply.get("message", ""))
    if error == "pages_out_of_range":
        total = int(reply["pages_total"])
        raise FetchError(
            Outcome.INVALID_REQUEST,
            f"pages asks for pages past the end of the document, which has {total}",
            f"The document has {total} pages (slides, sheets or chapters): "
            f"ask for pages between 1 and {total}.",
        )
    if error == "too_long":
        raise FetchError(
            Outcome.TOO_LONG,
            f"the document cannot be read whole: {message or f'its text is over {max_chars} characters'}",
            'Ask for fewer pages (slides, sheets, chapters), e.g. "1-3", or send a smaller document.',
        )
    if error == "encrypted":
        raise FetchError(Outcome.ENCRYPTED, f"the document is encrypted: {message}", Outcome.ENCRYPTED.hint)
    if error == "unsupported":
        raise FetchError(
            Outcome.UNSUPPORTED,
            f"the document is {message}, which sift cannot turn into text",
            Outcome.UNSUPPORTED.hint,
        )
    raise FetchError(Outcome.UNREADABLE, f"the document cannot be read: {message}", Outcome.UNREADABLE.hint)
