"""Clean-ups of a page's extracted text, line by line: what no kind of page wants the agent to
read again or to read at all — the leading lines that repeat the page's title (the envelope has
it), a long paragraph met twice (a quoted post, a description shown twice), a thread's sentence
met again (a quote run into a reply's line), a short call to action ("Learn more", "Add to
cart"). ``fetch.html.main_content`` applies them (docs/fetch-content.md).
"""

from __future__ import annotations

import re

import lxml.html

# A leading line that is part of the page's title, this long or longer, repeats it.
TITLE_PART_MIN_CHARS = 12
# On a thread or a product page, a paragraph this long met again is a repeat (a quote of an
# earlier post, a description shown twice); a shorter one, such as a question put to each guest
# of an interview, can be content.
REPEAT_MIN_CHARS = 200
# On a thread, a sentence this long met again is a quote of an earlier post, which extractors
# run into the reply's own line.
REPEAT_SENTENCE_MIN_CHARS = 40
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# A line that opens with a call to action ("Learn more about ...", "Get started", "Add to cart")
# and runs at most this many characters more, not ending as a sentence, is a button or a link to
# elsewhere, not the page's text.
CALL_TO_ACTION_TAIL = 40
_CALL_TO_ACTION = re.compile(
    r"^\W*(?:(?:learn|read|find out|see|view|show|discover|explore) more|explore|download"
    r"|free download|sign up|get started|start (?:free|now|your)|try (?:it )?(?:free|now|for free)"
    r"|buy now|shop now|add to (?:cart|basket|bag|wishlist)|contact (?:us|sales)"
    r"|(?:book|request|get) a demo|subscribe|register|log ?in|sign in|more info|details)"
    rf"\b.{{0,{CALL_TO_ACTION_TAIL}}}(?<![.:?!])$",
    re.IGNORECASE,
)
# A Markdown link's target, left out when a line is read for a call to action.
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_SPACES = re.compile(r"\s+")
_WORD = re.compile(r"\w+")


def drop_calls_to_action(content: str) -> str:
    """``content`` without its calls to action: a short line that opens with "Learn more", "Read
    more", "Get started", "Sign up", "Add to cart" and kin and does not end as a sentence (a
    button, or a link to another page) is no text of the page. A sentence that opens so ("Learn
    more jargon in our glossary.") stays, and so does a Markdown heading ("## Details")."""
    lines = content.split("\n")
    return "\n".join(line for line in lines if not _is_call_to_action(line))


def _is_call_to_action(line: str) -> bool:
    text = _LINK_TARGET.sub("]", line).strip()
    return not text.startswith("#") and _CALL_TO_ACTION.match(text) is not None


def drop_repeated_paragraphs(content: str) -> str:
    """``content`` without the paragraphs of at least ``REPEAT_MIN_CHARS`` that it already holds:
    on a thread, a reply quoting an earlier post repeats it; on a product page, a description
    shown twice (a summary and a tab, a copy for small screens). Markdown's ``>`` marks aside."""
    seen: set[str] = set()
    return "\n".join(line for line in content.split("\n") if _first_time(line, seen, REPEAT_MIN_CHARS))


def drop_repeated_sentences(content: str) -> str:
    """``content`` without the sentences of at least ``REPEAT_SENTENCE_MIN_CHARS`` that it already
    holds: a thread's reply quoting an earlier post repeats its sentences, often on the reply's own
    line ("@ann said in ...: <her sentence> I agree"). A line left empty goes."""
    seen: set[str] = set()
    kept = []
    for line in content.split("\n"):
        parts = [
            part for part in _SENTENCE_END.split(line) if _first_time(part, seen, REPEAT_SENTENCE_MIN_CHARS)
        ]
        if parts or not line.strip():
            kept.append(" ".join(parts))
    return "\n".join(kept)


def _first_time(text: str, seen: set[str], least: int) -> bool:
    """Whether ``text`` (its spacing and Markdown's ``>`` marks aside) is shorter than ``least`` or
    not in ``seen`` yet; it is in ``seen`` afterwards."""
    key = _SPACES.sub(" ", text).strip().lstrip("> ")
    if len(key) < least:
        return True
    if key in seen:
        return False
    seen.add(key)
    return True


def page_titles(tree: lxml.html.HtmlElement) -> set[str]:
    """The page's titles (``<title>``, ``og:title``, each ``<h1>``) as lower-case words."""
    found = tree.xpath("//title//text() | //meta[@property='og:title']/@content")
    found += ["".join(heading.itertext()) for heading in tree.xpath("//h1")]
    return {words for words in map(_words, found) if words}


def drop_title_lines(content: str, titles: set[str]) -> str:
    """``content`` without the leading lines that repeat the page's title (the envelope has it).

    A line repeats a title when its words are the title's, or a run of at least
    ``TITLE_PART_MIN_CHARS`` inside it ("Headline" of "Headline | Site").
    """
    lines = content.split("\n")
    start = 0
    while start < len(lines) and _is_title(_words(lines[start]), titles):
        start += 1
    return "\n".join(lines[start:]).lstrip("\n") if start else content


def _is_title(words: str, titles: set[str]) -> bool:
    if not words:
        return False
    if len(words) < TITLE_PART_MIN_CHARS:
        return words in titles
    return any(words in title for title in titles)


def _words(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))
