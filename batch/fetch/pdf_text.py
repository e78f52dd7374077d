"""The text of a PDF's pages, read by PDFium inside the sandbox."""

from __future__ import annotations

from dataclasses import dataclass

from batch.fetch.errors import FetchError
from batch.fetch.outcomes import Outcome
from batch.fetch.sandbox import get_sandbox
from batch.fetch.targets import PageRange

# CPU seconds a PDF may take: a base, and more for a bigger file.
PDF_CPU_SECONDS = 10.0
PDF_CPU_SECONDS_PER_MIB = 1.0
TIME_HINT = 'The PDF is too heavy to read whole: ask for fewer pages with pages, e.g. "1-20".'


@dataclass(frozen=True)
class PdfText:
    content: str
    pages_total: int
    pages: list[int]
    title: str | None


def pdf_text(body: bytes, page_ranges: tuple[PageRange, ...] | None, *, max_chars: int) -> PdfText:
    """Pages of ``body`` (all, or those of ``page_ranges``), each headed ``## Page N``.

    Raises ``FetchError``: ``invalid_request`` for a page range past the end (the hint names the
    page count), ``unsupported`` for a damaged or encrypted file, ``too_long`` for text over
    ``max_chars``, ``filter_timeout`` when PDFium runs out of time or memory.
    """
    cpu_seconds = PDF_CPU_SECONDS + PDF_CPU_SECONDS_PER_MIB * len(body) / (1 << 20)
    reply, data = get_sandbox().run(
        "pdf",
        {"ranges": [list(r) for r in page_ranges] if page_ranges else None, "max_chars": max_chars},
        body,
        cpu_seconds=cpu_seconds,
        wall_seconds=cpu_seconds * 1.5 + 2,
        subject="the PDF reader",
        hint=TIME_HINT,
        max_reply_bytes=max_chars * 4 + 1024,
    )
    error = reply.get("error")
    if error == "pages_out_of_range":
        total = int(reply["pages_total"])
        raise FetchError(
            Outcome.INVALID_REQUEST,
            f"pages asks for pages past the end of the document, which has {total} pages",
            f"The document has {total} pages: ask for pages between 1 and {total}.",
        )
    if error == "pdf_invalid":
        raise FetchError(
            Outcome.UNSUPPORTED,
            f"the PDF cannot be read: {reply.get('message', 'damaged file')}",
            "The file is damaged or password-protected; look for another copy of the document.",
        )
    if error == "too_long":
        raise FetchError(
            Outcome.TOO_LONG,
            f"the PDF's text is over {max_chars} characters",
            'Ask for fewer pages with pages, e.g. "1-20", or narrow with grep or question.',
        )
    return PdfText(
        content=data.decode("utf-8", "replace"),
        pages_total=int(reply["pages_total"]),
        pages=[int(n) for n in reply["pages"]],
        title=reply.get("title"),
    )
