"""Extraction quality per page type, and the rules that choose the main content.

The labelled pages live in ``bench/pages`` and, outside the repository, in the bench-data
directory's ``wcxb-dev`` (``bench.quality`` scores both, and the article benchmark, with figures
beside trafilatura's); here a few pages of each type run through sift's extraction as the service
does, and each type's mean word F1 must stay at its floor. The floors are the figures measured
when they were set (docs/benchmarks.md) less a margin of 0.02.
"""

from __future__ import annotations

from collections import defaultdict

import lxml.html
import pytest

from bench import data
from bench.quality import PAGES, LabelledPage, benchmark_pages, mean, non_article_pages, score
from fetch.extract import extract
from fetch.html import main_content as html_module
from fetch.html.declared_kind import page_kind
from fetch.html.line_cleanup import (
    REPEAT_MIN_CHARS,
    REPEAT_SENTENCE_MIN_CHARS,
    drop_calls_to_action,
    drop_repeated_paragraphs,
    drop_repeated_sentences,
    drop_title_lines,
    page_titles,
)
from fetch.html.main_content import choose_reading, html_text, peer_items
from fetch.html.page_kinds import drop_overlays, drop_related_sections, grows_inside, main_element
from fetch.html.reader import read_page
from fetch.targets import TargetOptions

# Pages of each wcxb-dev type in the CI sample, the first of the tune half: the check half is the
# test set, never tuned on, not even through a floor (bench/quality.py).
WCXB_PER_TYPE = 5
# Each floor sits 0.02 under what the sample measured when it was set, and measured again on
# 7 December 2026 (docs/benchmarks.md, "Page kinds and unseen sites"): sift article 0.960,
# collection 0.694, documentation 0.915, forum 0.891, listing 0.644, product 0.785, service 0.899;
# trafilatura's defaults article 0.811, collection 0.708, documentation 0.813, forum 0.837,
# listing 0.604, product 0.829, service 0.905 on it.
WCXB_FLOORS = {
    "article": 0.94,
    "collection": 0.67,
    "documentation": 0.89,
    "forum": 0.87,
    "listing": 0.62,
    "product": 0.76,
    "service": 0.88,
}
ARTICLE_HEAD = "<head><meta property='og:type' content='article'></head>"
PAGES_FLOORS = {
    "docs": 0.97,
    "forum": 0.83,
    "listing": 0.93,
    "misc": 0.98,
    "product": 0.91,
    "qa": 0.77,
    "reading": 0.97,
}
# A page written to be rendered (bench/pages/rendered): tests/test_render_auto.py renders it.
RENDERED_PAGES = PAGES / "rendered"
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


def mean_f1_per_type(pages: list[LabelledPage]) -> dict[str, float]:
    """sift text mode's mean word F1 on each page type, through ``extract`` as the service runs it."""
    text = TargetOptions(mode="text")
    found: dict[str, list[float]] = defaultdict(list)
    for page in pages:
        content = extract(
            page.body, declared_type="text/html", charset=None, url=page.url, options=text
        ).content
        found[page.page_type].append(score(content, page.truth).f1)
    return {page_type: round(mean(values), 3) for page_type, values in found.items()}


def wcxb_sample() -> list[LabelledPage]:
    folder = data.found(data.default_dir(), data.WCXB)
    if folder is None:
        pytest.skip(
            f"no {data.WCXB} data set in {data.default_dir()}: set SIFT_BENCH_DATA to the bench-data "
            "directory that holds it"
        )
    taken: dict[str, int] = defaultdict(int)
    sample = []
    for page in benchmark_pages(folder, halves=True):
        if page.half == "tune" and taken[page.page_type] < WCXB_PER_TYPE:
            taken[page.page_type] += 1
            sample.append(page)
    return sample


def test_every_page_type_of_wcxb_keeps_its_floor() -> None:
    measured = mean_f1_per_type(wcxb_sample())

    assert set(measured) == set(WCXB_FLOORS)
    below = {kind: (f1, WCXB_FLOORS[kind]) for kind, f1 in measured.items() if f1 < WCXB_FLOORS[kind]}
    assert not below, below


def test_every_page_type_of_the_labelled_pages_keeps_its_floor() -> None:
    measured = mean_f1_per_type(non_article_pages())

    assert set(measured) == set(PAGES_FLOORS)
    below = {kind: (f1, PAGES_FLOORS[kind]) for kind, f1 in measured.items() if f1 < PAGES_FLOORS[kind]}
    assert not below, below


def kind_of(head: str, body: str = "<p>text</p>") -> str:
    return page_kind(lxml.html.document_fromstring(f"<html><head>{head}</head><body>{body}</body></html>"))


def ld(value: str) -> str:
    return f"<script type='application/ld+json'>{value}</script>"


def test_a_page_says_its_kind_in_json_ld_microdata_or_open_graph() -> None:
    assert kind_of(ld('{"@context": "https://schema.org", "@type": "Product", "name": "Hub"}')) == "product"
    assert kind_of("<meta property='og:type' content='product.item'>") == "product"
    assert kind_of(ld('{"@graph": [{"@type": "WebPage"}, {"@type": ["QAPage"]}]}')) == "forum"
    assert (
        kind_of("", "<div itemscope itemtype='https://schema.org/DiscussionForumPosting'>x</div>") == "forum"
    )
    assert kind_of(ld('{"@type": "TechArticle"}')) == "documentation"
    assert kind_of(ld('{"@type": "ItemList", "itemListElement": []}')) == "listing"
    assert kind_of(ld('{"@type": "NewsArticle"}')) == "article"
    assert kind_of("<meta property='og:type' content='article'>") == "article"
    assert kind_of("<meta property='og:type' content='website'>") == "page"
    assert kind_of("") == "page"


def test_og_type_article_yields_to_a_more_specific_schema_type() -> None:
    # Many sites put og:type article on every page; the schema.org type says more.
    og_article = "<meta property='og:type' content='article'>"

    assert kind_of(og_article + ld('{"@type": "Product"}')) == "product"
    assert kind_of(og_article + ld('{"@type": "DiscussionForumPosting"}')) == "forum"
    assert kind_of(og_article + ld('{"@type": "Organization"}')) == "article"


def test_broken_json_ld_still_names_its_types() -> None:
    assert kind_of(ld('{"@type": "Product", "name": "unterminated')) == "product"


def test_every_post_of_a_thread_is_content_not_only_the_first() -> None:
    # trafilatura alone takes the first post of this thread (its posts are div.post, alike)
    page, truth = labelled("forum-sourdough-starter")

    content = html_text(page, url="https://forum.example/t/1", markdown=False).content

    for paragraph in truth.split("\n"):
        assert paragraph in content
    assert "Joined: Mar 2019" not in content  # the author boxes stay out: only the posts' bodies
    assert "Quote" not in content


def test_a_thread_leaves_out_a_long_paragraph_met_again_a_reply_quoting_it() -> None:
    post = " ".join(f"On day {n} I tried feeding twice a day and the smell is gone." for n in range(1, 5))
    question = "What made you start baking bread at home?"
    content = f"{post}\n\n{question}\n\n> {post}\n\nAgreed, that works.\n\n{question}"
    assert len(post) >= REPEAT_MIN_CHARS > len(question)
    assert drop_repeated_paragraphs(content) == f"{post}\n\n{question}\n\n\nAgreed, that works.\n\n{question}"
    thread = (
        '<html><head><script type=\'application/ld+json\'>{"@type": "DiscussionForumPosting"}</script>'
        f"</head><body><article><p>{post}</p><p>Reply one, thanks.</p><blockquote><p>{post}</p></blockquote>"
        "<p>Glad it helped, keep it warm.</p></article></body></html>"
    )
    text = html_text(thread, url="https://forum.example/t/1", markdown=False).content
    assert text.count(post.strip()) == 1
    product = thread.replace("DiscussionForumPosting", "Product")
    assert html_text(product, url="https://shop.example/p/1", markdown=False).content.count(post.strip()) == 1


def test_a_thread_leaves_out_a_sentence_met_again_inside_a_reply() -> None:
    quoted = "Ubuntu 24.04 ships Qt 6.4.2 in its own packages."
    short = "Thanks, that helps."
    content = f"{quoted} Is that stable?\n\nAnn wrote. {quoted} Yes, it is. {short}\n\n{short}"
    assert len(quoted) >= REPEAT_SENTENCE_MIN_CHARS > len(short)
    without = f"{quoted} Is that stable?\n\nAnn wrote. Yes, it is. {short}\n\n{short}"
    assert drop_repeated_sentences(content) == without
    assert drop_repeated_sentences(f"{quoted}\n{quoted}\nDone.") == f"{quoted}\nDone."


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


@pytest.fixture
def readings(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The ``precision`` of each trafilatura reading ``main_content`` makes, in order."""
    seen: list[bool] = []
    read = html_module._trafilatura

    def counted(tree: lxml.html.HtmlElement, *, markdown: bool, precision: bool, images: bool = False) -> str:
        seen.append(precision)
        return read(tree, markdown=markdown, precision=precision, images=images)

    monkeypatch.setattr(html_module, "_trafilatura", counted)
    return seen


def test_only_a_short_precise_reading_of_an_article_is_read_again_for_recall(readings: list[bool]) -> None:
    article = "".join(f"<p>{post}</p>" for post in POSTS * 3)
    html_text(
        f"<html>{ARTICLE_HEAD}<body><article>{article}</article></body></html>",
        url="https://a.test/",
        markdown=False,
    )
    assert readings == [True]

    readings.clear()
    html_text(
        f"<html>{ARTICLE_HEAD}<body><article><p>{POSTS[0]}</p></article></body></html>",
        url="https://a.test/",
        markdown=False,
    )
    assert readings == [True, False]


def test_a_page_that_is_not_an_article_is_read_once_with_trafilatura_s_fallbacks(
    readings: list[bool],
) -> None:
    product = ld('{"@type": "Product", "name": "Starter jar"}')
    body = "".join(f"<p>{post}</p>" for post in POSTS)
    content = html_text(
        f"<html><head>{product}</head><body>{body}</body></html>", url="https://a.test/", markdown=False
    )

    assert readings == []  # not the article path's precise reading
    assert POSTS[0] in content.content
    assert POSTS[3] in content.content


# Plans as cards of short lines and links: trafilatura's reading leaves them out.
PLANS = "".join(
    f"<div class='card'><a href='/plans/{name.lower()}'><h3>{name}</h3></a>"
    f"<div class='price'>${price}/mo</div>"
    f"<div>{seats} seats</div><a href='/signup'>Choose</a></div>"
    for name, price, seats in (("Starter", 9, 3), ("Team", 29, 10), ("Business", 99, 50))
)
FURNITURE = (
    "<nav class='breadcrumbs'><a href='/'>Home</a> / <a href='/pricing'>Pricing</a></nav>"
    "<div class='share-bar'>Share on Mastodon</div><button>Talk to sales</button>"
)


def service_page(head: str = "", main_count: int = 1) -> str:
    intro = (
        "<p>Every plan includes unlimited projects, daily backups and support by e-mail, and can be "
        "cancelled at any time from the account page without a call to anyone.</p>"
    )
    main = f"<main>{FURNITURE}<h1>Pricing</h1>{intro}{PLANS}</main>" * main_count
    return (
        f"<html><head>{head}<title>Pricing | Acme</title></head><body>"
        "<header><a href='/'>Acme</a> <a href='/docs'>Docs</a></header>"
        f"{main}<footer>© Acme Inc. Privacy Terms</footer></body></html>"
    )


def test_a_short_line_opening_with_a_call_to_action_is_no_text_of_the_page() -> None:
    content = (
        "Code with confidence and fix issues quickly.\nLearn more about editing with the IDE\n"
        "- [Get started](https://ide.example/start)\nRead more\nAdd to cart\n"
        "Learn more jargon in our glossary.\nSee more photos:\nDownloads per month: 3,000\n## Details"
    )

    assert drop_calls_to_action(content) == (
        "Code with confidence and fix issues quickly.\n"
        "Learn more jargon in our glossary.\nSee more photos:\nDownloads per month: 3,000\n## Details"
    )
    page = (
        "<html><body><main><h2>Debugging</h2><p>Find and fix bugs with the profiling tools.</p>"
        "<p><a href='/debug'>Learn more about debugging</a></p></main></body></html>"
    )
    text = html_text(page, url="https://ide.example/", markdown=True).content
    assert "profiling tools" in text
    assert "Learn more" not in text


def test_a_page_of_no_kind_is_read_from_its_main_element_without_its_furniture() -> None:
    content = html_text(service_page(), url="https://acme.example/pricing", markdown=False).content

    for line in ("Starter", "$29/mo", "50 seats", "unlimited projects"):
        assert line in content
    for furniture in ("Share on Mastodon", "Talk to sales", "Privacy", "Docs"):
        assert furniture not in content


def test_a_page_with_more_than_one_main_element_is_left_to_trafilatura() -> None:
    one = lxml.html.document_fromstring(service_page())
    two = lxml.html.document_fromstring(service_page(main_count=2))

    found = main_element(one)
    assert found is not None
    assert "Share on Mastodon" not in found.text_content()
    assert main_element(two) is None


def test_a_section_named_after_its_own_heading_is_not_furniture() -> None:
    # Documentation tools give each section its title as an id, linked from its heading:
    # "respond-to-review-comments" names a section, not a comment thread; a block named
    # "comments" is still furniture, heading or not.
    page = lxml.html.document_fromstring(
        "<html><body><main><h1>Submitting patches</h1>"
        "<section id='respond-to-review-comments'><h2>Respond to review comments"
        " <a href='#respond-to-review-comments'>¶</a></h2>"
        "<p>Your patch will almost certainly get comments from reviewers.</p></section>"
        "<section id='comments'><h2>Comments</h2><p>Great article, thanks!</p></section>"
        "</main></body></html>"
    )

    found = main_element(page)
    assert found is not None
    assert "almost certainly get comments" in found.text_content()
    assert "Great article" not in found.text_content()
    # Read as the service reads it, links made absolute first.
    content = read_page(
        lxml.html.tostring(page, encoding="unicode"),
        url="https://docs.example/patches",
        markdown_mode=False,
        images=False,
        hidden_text="drop",
        rendered=False,
    ).page.content
    assert "almost certainly get comments" in content


def test_a_section_of_related_items_is_no_text_of_the_page() -> None:
    # A product's page shows the shop's "Related items" and "More like this" grids beside the
    # product; a buying guide under a "Related" heading is mostly prose, and stays.
    cards = "".join(f"<div><a href='/p/{n}'>Travel case {n}</a> $19.99</div>" for n in range(6))
    markup = (
        "<html><body><main><h1>Console, refurbished</h1>"
        "<section><p>A 7-inch OLED screen with vivid colours and a wide adjustable stand.</p></section>"
        f"<section><div><h2>Related items to explore</h2><div>{cards}</div></div>"
        f"<div><h2>More like this</h2><div>{cards}</div></div></section>"
        "<div><h2>Related advice</h2><p>Choose a case that fits the console with its grips on,"
        " and one with a pocket for cartridges.</p><a href='/advice'>Read more</a></div>"
        "</main></body></html>"
    )
    page = lxml.html.document_fromstring(markup)

    drop_related_sections(page)

    text = page.text_content()
    assert "7-inch OLED screen" in text
    assert "Travel case" not in text
    assert "More like this" not in text
    assert "fits the console with its grips on" in text
    content = html_text(markup, url="https://shop.example/console", markdown=False).content
    assert "7-inch OLED screen" in content
    assert "Travel case" not in content


def shop_page(main: bool) -> str:
    """A shop's grid of items (in ``<main>`` when ``main``) between a long menu and footer."""
    menu = "".join(f"<li><a href='/c/{n}'>Category {n}</a></li>" for n in range(30))
    cards = "".join(
        f"<div class='card'><a href='/p/{n}'>Cast iron skillet, {n + 6} inch</a><b>${20 + n}.99</b></div>"
        for n in range(24)
    )
    grid = f"<h1>Skillets</h1><div class='grid'>{cards}</div>"
    return (
        "<html><head><title>Skillets | Kitchen Shop</title></head><body>"
        f"<div class='note'>Save up to 60% this week.</div><header><ul>{menu}</ul></header>"
        f"{f'<main>{grid}</main>' if main else f'<div>{grid}</div>'}"
        f"<footer><ul>{menu}</ul><p>Kitchen Shop, 12 Harbour Street.</p></footer></body></html>"
    )


def test_a_page_of_no_kind_or_a_product_without_a_main_element_takes_the_recall_reading_when_much_longer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The balanced reading keeps one section of a service page; favouring recall keeps them all.
    section = "Our recruiters match you with finance talent, often within two days of your call."
    sections = "\n".join(f"{section} (section {n})" for n in range(4))
    asked: list[bool] = []

    def reading(*args: object, recall: bool = False, **kwargs: object) -> str:
        asked.append(recall)
        return sections if recall else section

    monkeypatch.setattr(html_module, "_trafilatura_page", reading)
    url = "https://staffing.example/finance"
    page = "<html><head>{head}</head><body>{body}</body></html>"

    product = page.format(head=ld('{"@type": "Product"}'), body="<div>x</div>")
    assert html_text(page.format(head="", body="<div>x</div>"), url=url, markdown=False).content == sections
    assert html_text(product, url=url, markdown=False).content == sections
    assert asked == [False, True, False, True]
    asked.clear()
    in_main = html_text(page.format(head="", body="<main>x</main>"), url=url, markdown=False).content
    manual = page.format(head=ld('{"@type": "TechArticle"}'), body="<div>x</div>")
    assert section in in_main
    assert "section 3" not in in_main
    assert html_text(manual, url=url, markdown=False).content == section
    assert asked == [False, False]  # a page that marks a main element, or names another kind, is read once

    asked.clear()
    monkeypatch.setattr(html_module, "RECALL_MORE", 10.0)
    assert html_text(page.format(head="", body="<div>x</div>"), url=url, markdown=False).content == section
    assert asked == [False, True]


def test_a_scrap_of_a_page_gives_way_to_its_main_element_else_to_the_whole_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # trafilatura, looking for running text, picks a promotion line on a shop's grid of items.
    monkeypatch.setattr(html_module, "_trafilatura_page", lambda *args, **kwargs: "Save up to 60% this week.")
    url = "https://shop.example/skillets"

    from_main = html_text(shop_page(main=True), url=url, markdown=False).content
    whole = html_text(shop_page(main=False), url=url, markdown=False).content

    assert "Cast iron skillet, 29 inch" in from_main
    assert "Category 7" not in from_main
    assert "Harbour Street" not in from_main
    assert "Cast iron skillet, 29 inch" in whole
    assert "Category 7" in whole


def test_a_scrap_of_a_grid_gives_way_to_the_grid_rather_than_the_whole_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # trafilatura keeps the prices of a grid of items and drops their names; the page marks no
    # main element, and the block holding every price is the grid, not the page's frame.
    prices = "\n".join(f"${20 + n}.99" for n in range(4))
    monkeypatch.setattr(html_module, "_trafilatura_page", lambda *args, **kwargs: prices)

    content = html_text(shop_page(main=False), url="https://shop.example/skillets", markdown=False).content

    assert "Cast iron skillet, 29 inch" in content
    assert "$43.99" in content
    assert "Category 7" not in content
    assert "Harbour Street" not in content


CONSENT = (
    "We and our 100 partners store and/or access information on a device, such as unique IDs in "
    "cookies, to process personal data. You may accept or manage your choices by clicking below, "
    "including your right to object where legitimate interest is used, or at any time in the "
    "privacy policy page. These choices will be signaled to our partners and will not affect "
    "browsing data. We and our partners process data to provide: use precise geolocation data, "
    "actively scan device characteristics for identification, personalised advertising and content."
)


def test_a_consent_banner_is_no_text_of_the_page() -> None:
    # A consent manager's banner holds the longest prose of a short thread: extractors take it.
    banner = (
        "<div id='onetrust-consent-sdk'><div id='onetrust-banner-sdk' role='region' "
        f"aria-label='Cookie banner'><p>{CONSENT}</p><button>Accept all</button></div></div>"
    )
    page = (
        "<html><head><title>Bottom fan mounts? | Case forum</title></head><body>"
        f"<div class='thread'><h1>Bottom fan mounts?</h1><p>{POSTS[0]}</p></div>"
        "<div class='cookie-recipes'><p>Our oatmeal cookie recipe, from the archive.</p></div>"
        f"{banner}</body></html>"
    )

    content = html_text(page, url="https://forum.example/t/1", markdown=False).content

    assert POSTS[0] in content
    assert "partners store" not in content
    # A block about cookies that is no banner stays.
    tree = lxml.html.document_fromstring(page)
    drop_overlays(tree)
    assert "oatmeal cookie recipe" in tree.text_content()
    assert "partners store" not in tree.text_content()


def test_a_modal_dialog_outside_the_main_element_is_no_text_of_the_page() -> None:
    offer = (
        "Join our list and get 15% off your first order, early access to new colours and sales, "
        "and a note from us twice a month. Unsubscribe at any time; we never share your address."
    )
    page = lxml.html.document_fromstring(
        "<html><body><header>Linen Co</header><main><h1>Percale sheet set</h1>"
        "<p>Crisp, cool cotton percale.</p><div role='dialog' aria-modal='true' aria-label='Size guide'>"
        "<p>Fitted sheets fit mattresses up to 16 inches deep.</p></div></main>"
        f"<div role='dialog' aria-modal='true' aria-label='Email offer'><p>{offer}</p></div>"
        f"<dialog open><p>{offer}</p></dialog></body></html>"
    )

    drop_overlays(page)

    assert "up to 16 inches deep" in page.text_content()
    assert "15% off" not in page.text_content()


def course_list(head: str) -> str:
    """A list of links (which trafilatura drops as link-dense) under an introduction, in <main>."""
    intro = (
        "<p>Our school offers evening courses for adults of every level, taught in small groups by "
        "working artists. Classes run from September to June in our studios by the river; materials "
        "are included in the fee, and every course ends with an exhibition of its students' work.</p>"
    )
    items = "".join(
        f"<li><a href='/courses/{n}'>Course {n}: evening classes in watercolour, level {n % 3 + 1}</a></li>"
        for n in range(20)
    )
    return (
        f"<html><head>{head}<title>Courses</title></head><body><header><a href='/'>Home</a></header>"
        f"<main><nav class='breadcrumbs'><a href='/'>Home</a></nav><h1>Courses</h1>{intro}<ul>{items}</ul>"
        "</main><footer>Privacy</footer></body></html>"
    )


def test_an_article_by_og_type_alone_is_read_from_its_main_element_when_it_holds_much_more() -> None:
    og_article = "<meta property='og:type' content='article'>"
    schema_article = og_article + ld('{"@type": "NewsArticle"}')

    og_only = html_text(course_list(og_article), url="https://school.example/c", markdown=False).content
    named = html_text(course_list(schema_article), url="https://school.example/c", markdown=False).content

    assert "Course 19: evening classes in watercolour, level 2" in og_only
    assert "Privacy" not in og_only
    assert "Course 19" not in named  # a named article keeps the article path's reading
    assert "exhibition of its students' work" in named


def sectioned_page() -> lxml.html.HtmlElement:
    """A service page: its sections in one block, related teasers beside it, in a page frame."""
    sections = "".join(f"<h2>Section {n}</h2><p>What the service does in part {n}.</p>" for n in range(4))
    teasers = "".join(f"<p>Related story {n}</p>" for n in range(4))
    return lxml.html.document_fromstring(
        "<html><body><header><a href='/'>Home</a></header><div><div class='body'>"
        f"<h1>Data platforms</h1><p>Intro to the service.</p>{sections}</div>"
        f"<div class='related'>{teasers}</div></div><footer>Privacy</footer></body></html>"
    )


def test_a_longer_reading_is_the_same_text_only_when_what_it_adds_lies_in_the_block_of_the_first() -> None:
    tree = sectioned_page()
    fast = "Data platforms\nIntro to the service.\nSection 0\nWhat the service does in part 0."
    rest = (f"Section {n}\nWhat the service does in part {n}." for n in (1, 2, 3))
    more_of_it = fast + "\n" + "\n".join(rest)
    other_parts = fast + "\n" + "\n".join(f"Related story {n}" for n in range(4))

    assert grows_inside(tree, fast, more_of_it)
    assert not grows_inside(tree, fast, other_parts)
    # A reading spread over the whole frame (the header's link and the body) has no block of its own.
    assert not grows_inside(tree, "Home\n" + fast, more_of_it)


def _text_of(name: str) -> str:
    page = next(page for page in non_article_pages() if page.name == name)
    return extract(
        page.body, declared_type="text/html", charset=None, url=page.url, options=TargetOptions(mode="text")
    ).content


def test_the_labelled_page_of_hidden_instructions_shows_none_of_them() -> None:
    content = _text_of("reading-hidden-instructions")
    for instruction in (
        "SYSTEM",
        "Assistant",
        "language models",
        "Ignore all",
        "crawlers",
        "optional",
        "29.99",
    ):
        assert instruction not in content
    assert "new growth at the top is the sign" in content  # in <details>
    assert "grows faster the following summer" in content  # faded in from opacity 0


def test_the_labelled_timetable_keeps_each_spanned_cell_in_its_column() -> None:
    content = _text_of("reading-spanned-table")
    assert "| Route | Weekdays | Weekdays | Weekends | Weekends |" in content
    assert "| North Isle to Harbour | 18:00 | 18:50 | 13:00 | 13:50 |" in content


def test_the_labelled_script_built_page_is_empty_as_served_and_said_to_be_script_built() -> None:
    (page,) = non_article_pages(RENDERED_PAGES)
    reading = read_page(
        page.body.decode(),
        url=page.url,
        markdown_mode=False,
        images=False,
        hidden_text="drop",
        rendered=False,
    )
    assert (reading.page.content, reading.script_built) == ("", True)
