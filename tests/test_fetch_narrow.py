"""Narrowing extracted text (docs/fetch-content.md): grep lines with RE2, question passages with BM25."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from fetch.answer.narrow import (
    PASSAGE_WORDS,
    QUESTION_WORDS,
    answer_passages,
    grep_lines,
    narrow,
    split_passages,
)
from fetch.targets import TargetOptions

POEM = "\n".join(
    [
        "one fish",  # 1
        "two fish",  # 2
        "red fish",  # 3
        "blue fish",  # 4
        "black cat",  # 5
        "white cat",  # 6
        "grey cat",  # 7
        "green dog",  # 8
        "brown dog",  # 9
        "red dog",  # 10
        "yellow bird",  # 11
        "pink bird",  # 12
    ]
)


def test_grep_with_context_gives_the_exact_expected_lines() -> None:
    content, matches = grep_lines(POEM, "^red", context=True)

    assert matches == 2
    assert content == "\n".join(
        [
            "1- one fish",
            "2- two fish",
            "3: red fish",
            "4- blue fish",
            "5- black cat",
            "--",
            "8- green dog",
            "9- brown dog",
            "10: red dog",
            "11- yellow bird",
            "12- pink bird",
        ]
    )


def test_grep_without_context_lists_only_the_matching_lines_numbered() -> None:
    content, matches = grep_lines(POEM, "cat$", context=False)

    assert matches == 3
    assert content == "5: black cat\n6: white cat\n7: grey cat"


def test_grep_runs_that_touch_are_merged_without_a_separator() -> None:
    content, _ = grep_lines(POEM, "^(blue|white) ", context=True)

    assert "--" not in content
    assert content.splitlines()[0] == "2- two fish"
    assert content.splitlines()[-1] == "8- green dog"


def test_grep_with_no_match_is_empty_content_and_zero_matches() -> None:
    assert grep_lines(POEM, "zebra", context=True) == ("", 0)


def test_grep_numbers_lines_of_text_with_windows_line_ends_without_the_carriage_return() -> None:
    content, _ = grep_lines("alpha\r\nbeta\r\n", "beta", context=False)

    assert content == "2: beta"


def test_catastrophic_pattern_over_a_50000_character_line_returns_well_under_a_second() -> None:
    line = "a" * 50_000 + "!"
    started = time.monotonic()

    content, matches = grep_lines(f"before\n{line}\nafter", "(a+)+$", context=False)

    # The one timing assertion of the suite: RE2's linear time is the feature under test.
    assert time.monotonic() - started < 1.0
    assert matches == 0
    assert content == ""


def test_narrow_turns_context_on_for_a_question_and_off_for_grep_by_default() -> None:
    grep_only = narrow(POEM, TargetOptions(grep="^red"))

    assert grep_only.matches == 2
    assert grep_only.content == "3: red fish\n10: red dog"
    assert grep_only.passages is None


ARTICLE = """# Visiting the lighthouse

The lighthouse stands on the northern cape and was built in 1867 from local granite.

## Opening hours

The lighthouse is open to visitors from April to October, every day from 10:00 to 17:00.
Tickets cost 6 euros for adults.

## Getting there

A ferry leaves the harbour every hour; the crossing takes twenty minutes.

## History

The keeper's family lived in the tower until the light was automated in 1974."""


def test_question_ranks_the_passage_that_answers_it_first() -> None:
    content, passages = answer_passages(ARTICLE, "When is the lighthouse open to visitors?", context=False)

    best = max(passages, key=lambda p: p["score"])
    assert best["n"] == 2
    assert "April to October" in content
    assert "ferry" not in content  # passage 3 shares no word with the question


def test_question_picks_the_passage_that_answers_it_out_of_a_long_page() -> None:
    filler = [
        f"Section {i}. The coastal path passes meadows, dunes and the old salt works; "
        + "walkers often stop here to rest and look at the sea. " * 12
        for i in range(60)
    ]
    answer = "The lighthouse is open to visitors from April to October, every day from 10:00 to 17:00."
    text = "\n\n".join([*filler[:37], answer, *filler[37:]])

    content, passages = answer_passages(text, "When is the lighthouse open to visitors?", context=False)

    assert passages == [{"n": 38, "score": passages[0]["score"]}]
    assert content == answer


def test_question_context_adds_the_passage_before_and_after_each_kept_one() -> None:
    content, passages = answer_passages(ARTICLE, "How long does the ferry crossing take?", context=True)

    assert [p["n"] for p in passages] == [3]
    assert "April to October" in content  # passage 2, before
    assert "ferry leaves the harbour" in content  # passage 3, kept
    assert "automated in 1974" in content  # passage 4, after
    assert "built in 1867" not in content  # passage 1, not a neighbour


def test_question_keeps_passages_in_document_order_with_a_gap_marker_between_distant_ones() -> None:
    content, passages = answer_passages(ARTICLE, "granite tower automated keeper built", context=False)

    assert [p["n"] for p in passages] == [1, 4]
    assert content.index("granite") < content.index("--") < content.index("automated")


def test_question_sharing_no_word_with_the_text_keeps_nothing() -> None:
    assert answer_passages(ARTICLE, "quantum chromodynamics", context=True) == ("", [])


def test_a_heading_stays_with_the_paragraph_under_it() -> None:
    passages = split_passages(ARTICLE)

    assert len(passages) == 4
    assert passages[1].startswith("## Opening hours\n\nThe lighthouse is open")


def test_long_paragraphs_are_cut_into_passages_of_bounded_length() -> None:
    paragraph = " ".join(f"word{i}" for i in range(PASSAGE_WORDS * 3 + 10))

    passages = split_passages(paragraph)

    assert len(passages) == 4
    assert all(len(p.split()) <= PASSAGE_WORDS for p in passages)
    assert " ".join(passages).split() == paragraph.split()


def test_question_output_stays_within_about_4000_words() -> None:
    text = "\n\n".join(
        f"Paragraph {i} mentions the harbour and the ferry. " + "filler " * 150 for i in range(100)
    )

    content, passages = answer_passages(text, "harbour ferry", context=True)

    assert len(content.split()) <= QUESTION_WORDS
    assert len(content.split()) > QUESTION_WORDS * 0.8
    assert len(passages) < 100


def test_grep_spans_are_each_matching_lines_first_match_as_offsets_into_the_text() -> None:
    text = POEM.replace("\n", "\r\n")  # raw mode keeps CR: offsets still count it

    narrowed = narrow(text, TargetOptions(grep="[a-z]+ cat", context=True))

    assert narrowed.matches == len(narrowed.spans or []) == 3
    assert [text[s.start : s.end] for s in narrowed.spans or []] == ["black cat", "white cat", "grey cat"]
    assert [narrowed.content[s.at :].split("\n")[0] for s in narrowed.spans or []] == [
        "5: black cat",
        "6: white cat",
        "7: grey cat",
    ]


@given(
    st.lists(
        st.sampled_from(["tide", "moon", " ", "\n", "\n\n", "## Tides", "\t", "\u00a0", "ebb"]), max_size=400
    )
)
def test_question_spans_hold_each_kept_passage_word_for_word(pieces: list[str]) -> None:
    text = "".join(pieces)

    narrowed = narrow(text, TargetOptions(question="moon tide", context=False))

    assert len(narrowed.spans or []) == len(narrowed.passages or [])
    for span in narrowed.spans or []:
        assert narrowed.content[span.at :].split()[: len(text[span.start : span.end].split())] == (
            text[span.start : span.end].split()
        )
