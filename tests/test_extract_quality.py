"""Extraction quality on pages that are not articles, and the rules that choose the main content.

The labelled pages live in ``bench/pages`` (``bench.quality`` scores them, and the article
benchmark, with figures); here they run through sift's extraction as the service does.
"""

from __future__ import annotations

import lxml.html
import pytest

from bench.quality import mean, non_article_pages, score, trafilatura_direct
from fetch import html_text as html_module
from fetch.extract import extract
from fetch.html_text import (
    choose_reading,
    drop_title_lines,
    html_text,
    page_titles,
    peer_items,
)
from fetch.targets import TargetOptions

POSTS = [
    "My starter is two weeks old and for three days it has smelled sharply of acetone, almost "
    "like nail polish remover. It still rises a little after feeding but never doubles.",
    "Not dead, just hungry: the smell shows up when the yeast has eaten everything. Feed it twice "
    "a day for a week with a higher ratio of flour and keep it somewhere warm.",
    "Agree. Switch half of the whole wheat to white flour for a while, since whole wheat ferments "
    "very fast and a young starter burns through it in a few hours.",
    "Update: two days of feeding twice a day and the smell is gone. It doubled in five hours "
    "this afternoon. Thank you both, I was about to throw it away!",
]


def labelled(name: str) -> tuple[str, str]:
    """A page of bench/pages, decoded, and its expected text."""
    page = next(page for page in non_article_pages() if page.name == name)
    return page.body.decode(), page.truth


def test_sift_is_not_worse_than_trafilatura_on_the_labelled_non_article_pages() -> None:
    pages = non_article_pages()
    assert len(pages) >= 30
    text = TargetOptions(mode="text")
    sift_f1 = mean(
        [
            score(
                extract(
                    page.body, declared_type="text/html", charset=None, url=page.url, options=text
                ).content,
                page.truth,
            ).f1
            for page in pages
        ]
    )
    trafilatura_f1 = mean([score(trafilatura_direct(page.body, page.url), page.truth).f1 for page in pages])

    assert sift_f1 >= trafilatura_f1, (sift_f1, trafilatura_f1)


def test_every_post_of_a_thread_is_content_not_only_the_first() -> None:
    # trafilatura alone takes the first post of this thread (its posts are div.post, alike)
    page, truth = labelled("forum-sourdough-starter")

    content = html_text(page, url="https://forum.example/t/1", markdown=False).content

    for paragraph in truth.split("\n"):
        assert paragraph in content
    assert "Joined: Mar 2019" not in content  # the author boxes stay out: only the posts' bodies
    assert "Quote" not in content


def test_comments_under_an_article_are_not_taken_for_its_posts() -> None:
    article = "".join(f"<p>{post}</p>" for post in POSTS[:2]) * 3
    comments = "".join(
        f"<div class='comment'><span class='who'>reader{n}</span><p>{POSTS[2 + n % 2]} (reader {n})</p></div>"
        for n in range(6)
    )
    page = (
        "<html><body><article><h1>Starters</h1>"
        f"{article}</article><section id='comments'>{comments}</section></body></html>"
    )
    tree = html_module.lxml.html.document_fromstring(page)

    assert peer_items(tree, "\n".join(POSTS[:2])) is None


def test_an_article_among_teasers_built_like_it_stands_alone() -> None:
    long_post = " ".join(POSTS)
    items = [f"<div class='item'><h2>Headline {n}</h2><p>{POSTS[n % 4][:90]}</p></div>" for n in range(9)]
    items.insert(0, f"<div class='item'><h2>Main story</h2><p>{long_post}</p></div>")
    tree = html_module.lxml.html.document_fromstring(f"<html><body><div>{''.join(items)}</div></body></html>")

    assert peer_items(tree, long_post) is None


def test_the_precise_reading_is_kept_unless_it_cut_into_the_text() -> None:
    recall = "Share this story\n" + "The text of the page. " * 20 + "\nRelated: other stories"
    precise = "The text of the page. " * 20

    assert choose_reading(recall, precise) == precise
    assert choose_reading(recall, precise[:100]) == recall
    assert choose_reading("", "") == ""


def test_text_mode_drops_leading_lines_that_repeat_the_title() -> None:
    titles = {"lighthouse reopens after restoration coastal news", "lighthouse reopens after restoration"}

    assert drop_title_lines("Lighthouse reopens after restoration\nThe old lighthouse", titles) == (
        "The old lighthouse"
    )
    # a line that is part of the title ("Headline | Site"), long enough not to be a common word
    assert drop_title_lines("Lighthouse reopens\nBody", titles) == "Body"
    assert drop_title_lines("News\nBody", titles) == "News\nBody"
    # only at the start: the title's words later in the text stay
    assert drop_title_lines("Body\nLighthouse reopens after restoration", titles) == (
        "Body\nLighthouse reopens after restoration"
    )


def test_page_titles_are_the_title_element_og_title_and_h1_in_words() -> None:
    tree = html_module.lxml.html.document_fromstring(
        "<html><head><title>A page | Site</title><meta property='og:title' content='A page!'>"
        "</head><body><h1>The <em>heading</em></h1><p>text</p></body></html>"
    )

    assert page_titles(tree) == {"a page site", "a page", "the heading"}


def test_text_mode_leaves_the_title_to_the_envelope_and_markdown_keeps_its_heading() -> None:
    page = (
        "<html><head><title>Starter smells like acetone | Bread Journal</title></head><body>"
        f"<article><h1>Starter smells like acetone</h1>{''.join(f'<p>{post}</p>' for post in POSTS)}"
        "</article></body></html>"
    )
    text = html_text(page, url="https://bread.example/a", markdown=False)
    markdown = html_text(page, url="https://bread.example/a", markdown=True)

    assert text.title == "Starter smells like acetone | Bread Journal"
    assert text.content.startswith(POSTS[0])
    assert markdown.content.startswith("# Starter smells like acetone")


def test_only_a_short_precise_reading_is_read_again_for_recall(monkeypatch: pytest.MonkeyPatch) -> None:
    readings: list[bool] = []
    read = html_module._trafilatura

    def counted(tree: lxml.html.HtmlElement, *, markdown: bool, precision: bool) -> str:
        readings.append(precision)
        return read(tree, markdown=markdown, precision=precision)

    monkeypatch.setattr(html_module, "_trafilatura", counted)
    article = "".join(f"<p>{post}</p>" for post in POSTS * 3)
    html_text(
        f"<html><body><article>{article}</article></body></html>", url="https://a.test/", markdown=False
    )
    assert readings == [True]

    readings.clear()
    html_text(
        f"<html><body><article><p>{POSTS[0]}</p></article></body></html>",
        url="https://a.test/",
        markdown=False,
    )
    assert readings == [True, False]
