"""The text of a PDF's pages, read by PDFium inside the sandbox."""

from __future__ import annotations

from dataclasses import dataclass

from fetch.errors import FetchError
from fetch.outcomes import Outcome
from fetch.sandbox.pool import get_sandbox
from fetch.targets import PageRange

# CPU seconds a PDF may take: a base, and more for a bigger file.
PDF_CPU_SECONDS = 10.0
PDF_CPU_SECONDS_PER_MIB = 1.0
TIME_HINT = 'The PDF is too heavy to read whole: ask for fewer pages with pages, e.g. "1-20".'
MEMORY_HINT = (
    'The PDF needs more memory than its reader has: ask for fewer pages with pages, e.g. "1-20", '
    "or look for a smaller copy of the document."
)
# A PDF at least this big is read by several children of the sandbox at once (the idle ones, then
# new ones while the pool has room), each taking a run of its pages (PDFium's text layout is most
# of the time, and it runs on one core per child); a smaller one, or a few pages asked for by
# closed ranges, by one child.
PDF_SHARED_MIN_BYTES = 64 << 10
PDF_SHARED_MIN_PAGES = 8


@dataclass(frozen=True)
class PdfText:
    content: str
    pages_total: int
    pages: list[int]
    title: str | None


def pdf_text(body: bytes, page_ranges: tuple[PageRange, ...] | None, *, max_chars: int) -> PdfText:
    """Pages of ``body`` (all, or those of ``page_ranges``), each headed ``## Page N``.

    Raises ``FetchError``: ``invalid_request`` for a page range past the end (the hint names the
    page count), ``encrypted`` for a file that needs a password, ``unsupported`` for a damaged
    one, ``too_long`` for text over ``max_chars``, ``filter_timeout`` when PDFium runs out of
    time, ``memory_limit`` when it runs out of memory.
    """
    cpu_seconds = PDF_CPU_SECONDS + PDF_CPU_SECONDS_PER_MIB * len(body) / (1 << 20)
    sandbox = get_sandbox()
    replies = sandbox.run_shared(
        "pdf",
        {"ranges": [list(r) for r in page_ranges] if page_ranges else None, "max_chars": max_chars},
        body,
        cpu_seconds=cpu_seconds,
        wall_seconds=cpu_seconds * 1.5 + 2,
        subject="the PDF reader",
        hint=TIME_HINT,
        memory_hint=MEMORY_HINT,
        max_reply_bytes=max_chars * 4 + 1024,
        max_children=sandbox.size if _worth_sharing(body, page_ranges) else 1,
    )
    # Every part opens the whole document, so an unreadable file or a page range past the end
    # is the same error in each; too long is too long in any part, or in all of them together.
    reply = replies[0][0]
    error = reply.get("error")
    if error == "pages_out_of_range":
        total = int(reply["pages_total"])
        raise FetchError(
            Outcome.INVALID_REQUEST,
            f"pages asks for pages past the end of the document, which has {total} pages",
            f"The document has {total} pages: ask for pages between 1 and {total}.",
        )
    if error == "pdf_invalid" and "password" in str(reply.get("message", "")).lower():
        raise FetchError(Outcome.ENCRYPTED, "the PDF is protected by a password", Outcome.ENCRYPTED.hint)
    if error == "pdf_invalid":
        raise FetchError(
            Outcome.UNSUPPORTED,
            f"the PDF cannot be read: {reply.get('message', 'damaged file')}",
            "The file is damaged or password-protected; look for another copy of the document.",
        )
    if any(part.get("error") == "too_long" for part, _ in replies) or (
        len(replies) > 1 and sum(int(part["chars"]) for part, _ in replies) > max_chars
    ):
        raise FetchError(
            Outcome.TOO_LONG,
            f"the PDF's text is over {max_chars} characters",
            'Ask for fewer pages with pages, e.g. "1-20", and read the rest in another fetch.',
        )
    return PdfText(
        content=b"\n\n".join(data for part, data in replies if part["pages"]).decode("utf-8", "replace"),
        pages_total=int(reply["pages_total"]),
        pages=[int(n) for part, _ in replies for n in part["pages"]],
        title=reply.get("title"),
    )


def _worth_sharing(body: bytes, page_ranges: tuple[PageRange, ...] | None) -> bool:
    if len(body) < PDF_SHARED_MIN_BYTES:
        return False
    if page_ranges is None or any(end is None for _, end in page_ranges):
        return True
    return sum(end - start + 1 for start, end in page_ranges if end is not None) >= PDF_SHARED_MIN_PAGES
