"""Narrowing extracted text to what the agent asked for: grep lines, question passages.

grep output numbers every line by its place in the extracted text: ``12: text`` for a matching
line, ``12- text`` for a context line (as GNU grep does with ``:`` and ``-``), and ``--`` between
runs that are not adjacent. Question output is the kept passages as written, in document order,
with ``--`` between passages that are not adjacent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

from fetch.targets import TargetOptions

CONTEXT_LINES = 2
# A paragraph longer than this is cut into passages of at most this many words.
PASSAGE_WORDS = 200
# The kept passages, with their context, add up to about this many words.
QUESTION_WORDS = 4000
GAP = "--"

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_HEADING = re.compile(r"#{1,6} \S")
_LINE_END = re.compile(r"\n")
_WORD = re.compile(r"\S")
# Document language → (Snowball stemmer, bm25s stop-word list); English when unknown.
_LANGUAGES = {
    "en": ("english", "en"),
    "de": ("german", "de"),
    "fr": ("french", "fr"),
    "es": ("spanish", "es"),
    "it": ("italian", "it"),
    "pt": ("portuguese", "pt"),
    "nl": ("dutch", "nl"),
    "sv": ("swedish", "sv"),
    "no": ("norwegian", "no"),
    "nb": ("norwegian", "no"),
    "da": ("danish", "da"),
    "ru": ("russian", "ru"),
    "tr": ("turkish", "tr"),
}


@dataclass(frozen=True)
class Span:
    """Where a grep match or a question passage is: ``start``/``end`` in the text narrowed, ``at``
    where it is shown in the narrowed content (to tell which slice shows it), ``page`` of a PDF."""

    at: int
    start: int
    end: int
    page: int | None = None


@dataclass(frozen=True)
class Narrowed:
    content: str
    matches: int | None = None
    passages: list[dict[str, Any]] | None = None
    spans: list[Span] | None = None


def narrow(text: str, options: TargetOptions, *, lang: str | None = None) -> Narrowed:
    """Apply ``grep``, then ``question``, as ``options`` ask; the text unchanged when neither.

    ``spans`` are the grep matches, else the question's kept passages; with both, the grep
    matches the kept passages show (a passage of grep's numbered lines is no span of the text).
    """
    matches = passages = spans = None
    if options.grep is not None:
        text, matches, spans = _grep(text, options.grep, context=options.wants_context)
    if options.question is not None:
        text, passages, kept = _answer(text, options.question, context=options.wants_context, lang=lang)
        spans = kept if spans is None else _within(spans, kept)
    return Narrowed(text, matches, passages, spans)


def _within(matches: list[Span], passages: list[Span]) -> list[Span]:
    """The grep matches inside the kept passages of grep's output, placed where those are shown."""
    return [
        Span(passage.at + match.at - passage.start, match.start, match.end)
        for passage in passages
        for match in matches
        if passage.start <= match.at < passage.end
    ]


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def grep_lines(text: str, pattern: str, *, context: bool) -> tuple[str, int]:
    """The lines of ``text`` that ``pattern`` (RE2) matches, numbered, and how many matched."""
    content, matches, _ = _grep(text, pattern, context=context)
    return content, matches


def _grep(text: str, pattern: str, *, context: bool) -> tuple[str, int, list[Span]]:
    options = re2.Options()
    options.log_errors = False
    regex = re2.compile(pattern, options=options)
    lines = _lines(text)
    found = {number: match for number, line in enumerate(lines) if (match := regex.search(line))}
    hits = list(found)
    starts = _line_starts(text)
    spread = CONTEXT_LINES if context else 0
    shown: dict[int, str] = {}
    for hit in hits:
        for number in range(max(0, hit - spread), min(len(lines), hit + spread + 1)):
            shown.setdefault(number, "-")
        shown[hit] = ":"
    out: list[str] = []
    spans: list[Span] = []
    at = 0
    previous = None
    for number in sorted(shown):
        if previous is not None and number != previous + 1 and context:
            out.append(GAP)
            at += len(GAP) + 1
        out.append(f"{number + 1}{shown[number]} {lines[number]}")
        match = found.get(number)
        if match:
            spans.append(Span(at, starts[number] + match.start(), starts[number] + match.end()))
        at += len(out[-1]) + 1
        previous = number
    return "\n".join(out), len(hits), spans


def _line_starts(text: str) -> list[int]:
    return [0, *(match.end() for match in _LINE_END.finditer(text))]


def split_passages(text: str) -> list[str]:
    """Paragraphs, a heading joined to the paragraph under it, long ones cut at lines or words."""
    passages: list[str] = []
    heading = ""
    for raw_block in _PARAGRAPH_BREAK.split(text):
        block = raw_block.strip()
        if not block:
            continue
        if _HEADING.match(block) and "\n" not in block:
            heading = f"{heading}\n\n{block}" if heading else block
            continue
        passages.extend(_cut(f"{heading}\n\n{block}" if heading else block))
        heading = ""
    if heading:
        passages.append(heading)
    return passages


def _cut(block: str) -> list[str]:
    if len(block.split()) <= PASSAGE_WORDS:
        return [block]
    pieces: list[str] = []
    current: list[str] = []
    count = 0
    for line in block.split("\n"):
        words = line.split()
        if current and count + len(words) > PASSAGE_WORDS:
            pieces.append("\n".join(current))
            current, count = [], 0
        if len(words) <= PASSAGE_WORDS:
            current.append(line)
            count += len(words)
            continue
        # One very long line: whole pieces between words, the rest starts the next passage.
        while len(words) > PASSAGE_WORDS:
            pieces.append(" ".join(words[:PASSAGE_WORDS]))
            words = words[PASSAGE_WORDS:]
        current, count = [" ".join(words)], len(words)
    pieces.append("\n".join(current))
    return [piece for piece in pieces if piece.strip()]


@lru_cache(maxsize=16)
def _language(lang: str | None) -> tuple[str, str]:
    return _LANGUAGES.get((lang or "en").split("-")[0].lower(), _LANGUAGES["en"])


def rank_passages(passages: list[str], question: str, *, lang: str | None = None) -> list[float]:
    """The BM25 score of each passage for ``question`` (0 when they share no term).

    bm25s (with NumPy and SciPy) is imported by the first question a process answers: it is most
    of the memory of a process that never ranks a passage (docs/decisions.md)."""
    import bm25s  # noqa: PLC0415
    import Stemmer  # noqa: PLC0415

    algorithm, stopwords = _language(lang)
    stemmer = Stemmer.Stemmer(algorithm)
    tokenizer = bm25s.tokenization.Tokenizer(stopwords=stopwords, stemmer=stemmer.stemWord)
    corpus = tokenizer.tokenize(passages, update_vocab=True, return_as="ids", show_progress=False)
    query = tokenizer.tokenize([question], update_vocab=False, return_as="ids", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    return [float(score) for score in retriever.get_scores(query[0])]


def answer_passages(
    text: str, question: str, *, context: bool, lang: str | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """The passages that best answer ``question``, up to about ``QUESTION_WORDS`` words.

    Returns the text to show and ``[{"n": passage number (1-based), "score": BM25 score}]`` for
    the ranked passages kept; context passages are shown but not listed.
    """
    content, listed, _ = _answer(text, question, context=context, lang=lang)
    return content, listed


def _answer(
    text: str, question: str, *, context: bool, lang: str | None
) -> tuple[str, list[dict[str, Any]], list[Span]]:
    passages = split_passages(text)
    if not passages:
        return "", [], []
    scores = rank_passages(passages, question, lang=lang)
    sizes = [len(passage.split()) for passage in passages]
    kept: set[int] = set()
    shown: set[int] = set()
    words = 0
    for index in sorted(range(len(passages)), key=lambda i: (-scores[i], i)):
        if scores[index] <= 0:
            break
        spread = (
            range(max(0, index - 1), min(len(passages), index + 2)) if context else range(index, index + 1)
        )
        cost = sum(sizes[i] for i in spread if i not in shown)
        if kept and words + cost > QUESTION_WORDS:
            break
        kept.add(index)
        shown.update(spread)
        words += cost
    places = _locate(text, passages[: max(shown) + 1]) if shown else []
    out: list[str] = []
    spans: list[Span] = []
    at = 0
    previous = None
    for index in sorted(shown):
        if previous is not None and index != previous + 1:
            out.append(GAP)
            at += len(GAP) + 2
        if index in kept:
            spans.append(Span(at, *places[index]))
        out.append(passages[index])
        at += len(passages[index]) + 2
        previous = index
    listed = [{"n": i + 1, "score": round(scores[i], 4)} for i in sorted(kept)]
    return "\n\n".join(out), listed, spans


def _locate(text: str, passages: list[str]) -> list[tuple[int, int]]:
    """Where each passage lies in ``text``, from its first word to its last.

    Passages hold every word of the text in order and differ from it only in whitespace, so
    each is found from where the one before ended: as written, or else word by word.
    """
    places: list[tuple[int, int]] = []
    position = 0
    for passage in passages:
        first = _WORD.search(text, position)
        start = first.start() if first else position
        if text.startswith(passage, start):
            position = start + len(passage)
        else:
            position = start
            for word in passage.split():
                position = text.index(word, position) + len(word)
        places.append((start, position))
    return places
