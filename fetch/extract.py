"""Downloaded bytes → agent-ready text, narrowed as the options ask (docs/fetch-content.md).

``extract`` is the one entry point: it decides what the body is, turns it into text (HTML main
content, PDF pages, pretty JSON or a jq view, plain text), applies ``grep`` and ``question``,
enforces ``FETCH_MAX_CHARS`` and cleans what it returns. It raises only ``FetchError``. HTML,
PDF and JSON are parsed in the sandbox's limited children, never in this process.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from fetch.answer.narrow import Span, narrow
from fetch.documents.document_text import document_text
from fetch.documents.json_text import NotJson, json_text
from fetch.documents.pdf_text import pdf_text
from fetch.documents.sniff import (
    DOCUMENT_KINDS,
    HTML_TYPES,
    UNSUPPORTED_HINT,
    clean_text,
    declared_charset,
    decode_text,
    media_type,
    sniff_kind,
    utf8_text,
)
from fetch.errors import FetchError
from fetch.outcomes import Outcome
from fetch.sandbox.pool import get_sandbox
from fetch.targets import TargetOptions

# The most text a parser (HTML, PDF, jq) hands back from one document, before it is narrowed or
# sliced: more cannot be read at all (too_long). Text documents are bounded by FETCH_MAX_BYTES.
READABLE_CHARS = 10_000_000
_PDF_PAGE = re.compile(r"^## Page (\d+)$", re.MULTILINE)
_WORD = re.compile(r"\w")
DEFAULT_MEDIA_TYPES = {
    "html": "text/html",
    "pdf": "application/pdf",
    "json": "application/json",
    "text": "text/plain",
}
# CPU seconds HTML extraction may take in the sandbox: a base, and more for a bigger page; well
# above what a large ordinary page needs, so that only a pathological one runs out.
HTML_CPU_SECONDS = 10.0
HTML_CPU_SECONDS_PER_MIB = 1.0
HTML_TIME_HINT = (
    'The page is too heavy to extract: fetch it with mode "raw" and narrow with grep, '
    "or look for a lighter version of it (a print view, a feed, an API)."
)
# The most an HTML page's facts (metadata, structured data, tables) take in the child's reply,
# beside its text: fetch.html.facts caps each of them well below it.
FACTS_MAX_BYTES = 4 << 20
HTML_MEMORY_HINT = (
    'The page is too large to extract in memory: fetch it with mode "raw" and narrow with grep, '
    "or look for a smaller version of it (a print view, a feed, an API)."
)


@dataclass(frozen=True)
class Extracted:
    """The content of one document, and the envelope fields that describe it (docs/api.md).

    ``kind`` is what sift read the body as (html, pdf, json, text) and ``media_type`` the type
    that goes with it, which differs from the declared one when the bytes said otherwise.
    """

    content: str
    kind: str
    media_type: str
    title: str | None = None
    lang: str | None = None
    canonical_url: str | None = None
    pages_total: int | None = None
    pages: list[int] | None = None
    matches: int | None = None
    passages: list[dict[str, Any]] | None = None
    # The version of the whole text, before grep and question; where their matches lie in it.
    content_sha256: str | None = None
    spans: list[Span] | None = None
    # An HTML page read for its text: how much hidden text was dropped (or whether it was kept
    # for want of any other), whether the whole text holds no word, whether it looks script-built.
    hidden_chars: int | None = None
    hidden_kept: bool = False
    wordless: bool = False
    script_built: bool = False
    # What an HTML page says about itself (fetch.html.facts): ``metadata`` always, the structured
    # data and product when asked; its data tables when asked (with their place in the text).
    facts: dict[str, Any] | None = None
    tables: list[dict[str, Any]] | None = None
    # A paged document (PDF pages, slides, sheets, chapters): where each part starts in
    # ``content``, with its number. A feed: its entries, in order.
    part_starts: list[tuple[int, int]] | None = None
    entries: list[dict[str, Any]] | None = None

    def meta(self) -> dict[str, Any]:
        """``title`` always; ``lang``, ``canonical_url``, ``pages_total``, ``pages``,
        ``matches``, ``passages``, ``hidden_chars`` and ``entries`` where they apply;
        ``hidden_kept`` when true; an HTML page's facts (``metadata``, and ``structured_data``
        with the rest when asked)."""
        optional = (
            "lang",
            "canonical_url",
            "pages_total",
            "pages",
            "matches",
            "passages",
            "hidden_chars",
            "entries",
        )
        fields = {name: getattr(self, name) for name in optional}
        kept = {"hidden_kept": True} if self.hidden_kept else {}
        facts = self.facts or {}
        return {"title": self.title, **{k: v for k, v in fields.items() if v is not None}, **kept, **facts}


def extract(
    body: bytes,
    *,
    declared_type: str,
    charset: str | None,
    url: str,
    options: TargetOptions,
    rendered: bool = False,
    name: str | None = None,
) -> Extracted:
    """Turn ``body`` into the content ``options`` ask for.

    ``declared_type`` is the upstream ``Content-Type`` (parameters allowed), ``charset`` its
    charset if known, ``url`` the final URL (for the canonical link and relative links),
    ``rendered`` whether a browser made the body (hidden text is then what it marked), ``name``
    the file's name where it is not the URL's path (an upload's: ``.csv`` says a table). An HTML
    page whose text holds no word comes back ``wordless`` (``refuse_empty`` says what to answer).
    Raises ``FetchError``:
    ``unsupported``, ``invalid_request`` (an option that does not fit this document, pages past
    the end), ``too_long`` (a parser's text over ``READABLE_CHARS``), ``filter_timeout`` (a parser out of
    time), ``memory_limit`` (a parser out of memory).
    """
    charset = charset or declared_charset(declared_type)
    kind = sniff_kind(body, declared_type, charset, name=urlsplit(url).path if name is None else name)
    _check_options_fit(kind, options)
    document = _read(
        kind,
        body,
        declared_type=declared_type,
        charset=charset,
        url=url,
        options=options,
        budget=READABLE_CHARS,
        rendered=rendered,
    )
    version = hashlib.sha256(document.content.encode("utf-8", "surrogatepass")).hexdigest()
    document = replace(document, content_sha256=version)
    if options.grep is None and options.question is None:
        return document
    narrowed = narrow(document.content, options, lang=document.lang)
    spans = narrowed.spans or []
    if kind == "pdf":
        spans = _on_pages(spans, _pdf_page_starts(document.content))
    elif document.part_starts:
        spans = _on_pages(spans, document.part_starts)
    return replace(
        document,
        content=narrowed.content,
        matches=narrowed.matches,
        passages=narrowed.passages,
        spans=spans,
    )


def _pdf_page_starts(text: str) -> list[tuple[int, int]]:
    """Where each PDF page starts (pages are headed ``## Page N`` in the text), and its number."""
    return [(heading.start(), int(heading[1])) for heading in _PDF_PAGE.finditer(text)]


def _on_pages(spans: list[Span], page_starts: list[tuple[int, int]]) -> list[Span]:
    """Each span with the page (slide, sheet, chapter) it starts on."""
    starts = [start for start, _ in page_starts]
    pages = [number for _, number in page_starts]
    placed = []
    for span in spans:
        index = bisect.bisect_right(starts, span.start) - 1
        placed.append(replace(span, page=pages[index]) if index >= 0 else span)
    return placed


def _check_options_fit(kind: str, options: TargetOptions) -> None:
    # A zip archive's kind, and whether it has pages, is known once it is read (document_text).
    if options.pages is not None and kind not in ("pdf", "zip"):
        raise FetchError(
            Outcome.INVALID_REQUEST,
            f"pages applies to PDFs, slides, sheets and chapters, and this document is {kind}",
            "Leave pages out for this URL; use grep or question to narrow it.",
        )
    if options.jq is not None and kind not in ("json", "text"):
        raise FetchError(
            Outcome.INVALID_REQUEST,
            f"jq applies to JSON documents, and this document is {kind}",
            "Leave jq out for this URL; use grep or question to narrow it.",
        )
    if options.mode == "raw" and kind in ("pdf", "zip"):
        what = "a PDF" if kind == "pdf" else "an office document or book"
        raise FetchError(
            Outcome.UNSUPPORTED,
            f"raw mode serves text documents as is, and {what} is binary",
            UNSUPPORTED_HINT,
        )


def _read(
    kind: str,
    body: bytes,
    *,
    declared_type: str,
    charset: str | None,
    url: str,
    options: TargetOptions,
    budget: int,
    rendered: bool,
) -> Extracted:
    declared = media_type(declared_type)
    if kind == "pdf":
        pdf = pdf_text(body, options.page_ranges, max_chars=budget)
        title = clean_text(pdf.title) if pdf.title else None
        return Extracted(
            clean_text(pdf.content),
            "pdf",
            "application/pdf",
            title,
            pages_total=pdf.pages_total,
            pages=pdf.pages,
        )
    raw = options.mode == "raw"
    if kind in DOCUMENT_KINDS:
        return _read_document(kind, body, charset=charset, declared=declared, options=options, budget=budget)
    if kind == "html":
        typed = declared if declared in HTML_TYPES else DEFAULT_MEDIA_TYPES["html"]
        if raw:
            return Extracted(clean_text(decode_text(body, charset), keep_line_ends=True), "html", typed)
        payload = utf8_text(body, charset)
        return _read_html(payload, typed, url=url, options=options, budget=budget, rendered=rendered)
    text = clean_text(decode_text(body, charset), keep_line_ends=raw)
    if options.jq is not None or (kind == "json" and not raw):
        return _read_json(text, kind, declared, options, budget)
    return Extracted(text, kind, declared or DEFAULT_MEDIA_TYPES[kind])


def _read_document(
    kind: str, body: bytes, *, charset: str | None, declared: str, options: TargetOptions, budget: int
) -> Extracted:
    """An office document, book, feed, table or RTF file read in a sandbox child; in raw mode
    (never a zip archive, which ``_check_options_fit`` refused), its text as served."""
    if options.mode == "raw":
        text = clean_text(decode_text(body, charset), keep_line_ends=True)
        return Extracted(text, "text", declared or DEFAULT_MEDIA_TYPES["text"])
    payload = utf8_text(body, charset) if kind in ("csv", "tsv") else body
    document = document_text(
        kind, payload, options.page_ranges, markdown=options.mode == "markdown", max_chars=budget
    )
    return Extracted(
        clean_text(document.content),
        document.kind,
        declared
        if kind in ("csv", "tsv") and declared.startswith("text/") and declared != "text/plain"
        else document.media_type,
        clean_text(document.title) if document.title else None,
        pages_total=document.pages_total,
        pages=document.pages,
        part_starts=document.part_starts or None,
        entries=document.entries,
    )


def _read_html(
    payload: bytes, typed: str, *, url: str, options: TargetOptions, budget: int, rendered: bool
) -> Extracted:
    """Main content and metadata of a decoded page (``payload``: its cleaned text in UTF-8),
    extracted in a sandbox child."""
    cpu_seconds = HTML_CPU_SECONDS + HTML_CPU_SECONDS_PER_MIB * len(payload) / (1 << 20)
    header = {
        "url": url,
        "markdown": options.mode == "markdown",
        "images": options.images,
        "hidden": options.hidden,
        "rendered": rendered,
        "max_chars": budget,
        "structured": options.structured,
        "tables": options.tables,
    }
    reply, data = get_sandbox().run(
        "html",
        header,
        payload,
        cpu_seconds=cpu_seconds,
        wall_seconds=cpu_seconds * 1.5 + 2,
        subject="the HTML extractor",
        hint=HTML_TIME_HINT,
        memory_hint=HTML_MEMORY_HINT,
        max_reply_bytes=budget * 4 + 1024 + FACTS_MAX_BYTES,
    )
    if reply.get("error") == "too_long":
        # The extracted text cannot be read whole; the markup, which no parser hands back, can.
        raise FetchError(
            Outcome.TOO_LONG,
            f"the text is {int(reply['chars'])} characters, over the limit of {budget}",
            'Fetch it with mode "raw" and read it in slices, or narrow the markup with grep.',
        )
    title = clean_text(str(reply["title"])) if reply.get("title") else None
    lang, canonical_url = reply.get("lang"), reply.get("canonical_url")
    text = data.decode("utf-8", "replace")
    at = int(reply["facts_at"])
    # Cleaning keeps every offset: the child's text is UTF-8 already, without NUL or carriage return.
    content, facts = clean_text(text[:at]), json.loads(text[at:])
    tables = facts.pop("tables", None)
    return Extracted(
        content,
        "html",
        typed,
        title,
        str(lang) if lang else None,
        str(canonical_url) if canonical_url else None,
        hidden_chars=int(reply.get("hidden_chars") or 0),
        hidden_kept=bool(reply.get("hidden_kept")),
        wordless=_WORD.search(content) is None,
        script_built=bool(reply.get("script_built")),
        facts=facts,
        tables=tables,
    )


def refuse_empty(document: Extracted, *, rendered: bool) -> None:
    """``empty`` for an HTML page whose text holds no word; its hint says to render a page that
    looks built by scripts and was not rendered."""
    if not document.wordless:
        return
    if document.script_built and not rendered:
        hint = (
            "The page looks built by scripts (little text, an empty element for its scripts to "
            'fill): fetch it again with render true (or render "auto").'
        )
    elif rendered:
        hint = "Even rendered, the page shows no text: check the URL, or read it with mode raw."
    else:
        hint = Outcome.EMPTY.hint
    raise FetchError(Outcome.EMPTY, "the page holds no text to read", hint)


def _read_json(text: str, kind: str, declared: str, options: TargetOptions, budget: int) -> Extracted:
    typed = declared if kind == "json" and declared else DEFAULT_MEDIA_TYPES["json"]
    try:
        return Extracted(clean_text(json_text(text, options.jq, max_chars=budget)), "json", typed)
    except NotJson as exc:
        if options.jq is not None:
            raise FetchError(
                Outcome.INVALID_REQUEST,
                f"jq needs a JSON document, and this one does not parse: {exc}",
                "Leave jq out to read the document as text.",
            ) from None
    # Declared JSON that is not JSON (JSONP, a truncated body, an HTML error page): serve the text.
    return Extracted(text, "text", DEFAULT_MEDIA_TYPES["text"])
