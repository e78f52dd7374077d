"""Two ways a reading goes wrong on sites no rule was tuned on (issue 38, round 2).

An article's fast readings settle on one block of the page (a caption, a widget) and miss the
story: trafilatura's balanced reading, with its fallbacks, is taken instead. A page builder's
layout (rows of widgets sharing one class) looks like a thread's posts: the block followed in each
row must be the one that holds the extract in its own row.
"""

from __future__ import annotations

import lxml.html
import pytest

from fetch.html import main_content as html_module
from fetch.html.block_text import page_chars
from fetch.html.main_content import SCRAP_SHARE, html_text
from fetch.html.peers import peer_items

ARTICLE = '<script type=\'application/ld+json\'>{"@type": "Article"}</script>'
STORY = [
    f"Paragraph {n} of the story: the harbour's new breakwater took three winters to build, and "
    "the fishermen who argued against it now moor behind it every night of the storm season."
    for n in range(12)
]


# Longer than trafilatura's "too short" threshold, so that no rule for scraps of pages takes it.
CAPTION = "Photo: the breakwater at dawn, seen from the old lighthouse on the cliff. " * 4


def article_page() -> str:
    body = "".join(f"<p>{line}</p>" for line in STORY)
    return f"<html><head>{ARTICLE}</head><body><article>{body}</article></body></html>"


@pytest.fixture
def scrap_reading(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The fast readings answer a caption; each balanced reading asked for is counted."""
    balanced: list[str] = []
    read_page = html_module._trafilatura_page

    def fast(tree: lxml.html.HtmlElement, **_: object) -> str:
        return CAPTION

    def counted(tree: lxml.html.HtmlElement, **options: object) -> str:
        text = read_page(tree, **options)  # type: ignore[arg-type]
        balanced.append(text)
        return text

    monkeypatch.setattr(html_module, "_trafilatura", fast)
    monkeypatch.setattr(html_module, "_trafilatura_page", counted)
    return balanced


def test_an_article_whose_fast_reading_is_a_scrap_of_the_page_is_read_with_the_fallbacks(
    scrap_reading: list[str],
) -> None:
    content = html_text(article_page(), url="https://a.test/", markdown=False).content

    assert len(scrap_reading) == 1
    assert STORY[0] in content
    assert STORY[-1] in content
    assert "Photo:" not in content


def test_an_article_whose_fast_reading_holds_much_of_the_page_is_not_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[bool] = []
    monkeypatch.setattr(html_module, "_trafilatura_page", lambda *a, **k: asked.append(True) or "")

    content = html_text(article_page(), url="https://a.test/", markdown=False).content

    assert not asked
    assert STORY[5] in content


def test_the_page_s_text_is_counted_without_scripts_styles_or_runs_of_spaces() -> None:
    tree = lxml.html.document_fromstring(
        "<html><head><title>Not counted</title></head><body><p>one   two</p>"
        "<script>var x = 'not counted';</script><style>p { color: red }</style>"
        "<div>\n three </div></body></html>"
    )

    assert page_chars(tree) == len("one two three")
    assert 0 < SCRAP_SHARE < 1


def test_a_page_builder_s_rows_of_widgets_are_not_taken_for_a_thread_s_posts() -> None:
    # Each row holds widgets of one class: a heading widget first, then a text widget. The story's
    # text sits in the second widget of its row; the same steps in the other rows lead to their
    # first widgets, which are headings and buttons, not posts.
    rows = [
        "<div class='row'><div class='widget'><h2>Sign up for our newsletter</h2></div>"
        "<div class='widget'><p>Every week, no spam.</p></div></div>",
        f"<div class='row'><div class='widget'><h2>The breakwater</h2></div>"
        f"<div class='widget'>{''.join(f'<p>{line}</p>' for line in STORY[:4])}</div></div>",
        "<div class='row'><div class='widget'><h2>Related stories</h2></div>"
        "<div class='widget'><p>Harbour news, lighthouse news and the ferry's timetable.</p></div></div>",
    ]
    extra = "<div class='row'><div class='widget'><h2>More</h2></div><div class='widget'><p>"
    extra += " ".join(STORY) + "</p></div></div>"
    tree = lxml.html.document_fromstring(f"<html><body><div>{''.join(rows)}{extra}</div></body></html>")

    assert peer_items(tree, "\n".join(STORY[:4])) is None


def test_a_thread_s_posts_are_still_every_post_s_body() -> None:
    posts = "".join(
        f"<div class='post'><div class='author'>member{n}</div><div class='body'><p>{line}</p></div></div>"
        for n, line in enumerate(STORY[:4])
    )
    tree = lxml.html.document_fromstring(f"<html><body><div>{posts}</div></body></html>")

    found = peer_items(tree, STORY[0])

    assert found is not None
    assert [item.text_content() for item in found] == STORY[:4]
