"""Markdown an agent can follow (``fetch/html/markdown.py``): links as ``[text](absolute url)`` against
``<base href>``, no ``data:`` URI ever, images on request, spanned table cells in their columns,
code blocks with their language; through ``/v1/fetch`` and batch targets (docs/fetch-content.md)."""

from __future__ import annotations

import re

import lxml.html
import pytest

from batch.engine.seam import Caller
from batch.pipeline_bridge import fetch_target
from bench.extract import token_f1
from fetch.html.markdown import code_language, finish, repeat_spanned_cells
from fetch.html.reader import read_page
from fetch.targets import parse_target

from .factories import LOOPBACK

LONG = "The harbour master keeps a record of every ship that enters the port, with its cargo and crew."
PAGE = f"""<!doctype html><html lang="en"><head><title>Harbour records</title>
<base href="/archive/2024/"></head><body><main><article><h1>Harbour records</h1>
<p>{LONG} Read the <a href="ships.html">list of ships</a>, the <a href="/about#keeper">keeper's page</a>,
the <a href="https://other.example/charts">charts</a>,
a <a href="data:text/html;base64,PHA+aGk8L3A+">data link</a>
and a <a href="javascript:alert(1)">script link</a>.</p>
<p>{LONG} The pier in winter: <img src="pier.jpg" alt="The pier in winter"> and a drawing
<img src="data:image/png;base64,iVBORw0KGgo=" alt="Inline drawing"> of it.</p>
<pre><code class="language-python">for ship in ships:
    print(ship.name)
</code></pre>
<table><tr><th>Ship</th><th colspan="2">Cargo and crew</th></tr>
<tr><td rowspan="2">Aurora</td><td>timber</td><td>12</td></tr>
<tr><td>coal</td><td>9</td></tr></table>
<p>{LONG} The records go back to the year the harbour opened, and are kept in the town hall.</p>
</article></main></body></html>"""


@pytest.fixture
def open_loopback(settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK


def _read(markup: str, *, images: bool = False, markdown_mode: bool = True) -> str:
    reading = read_page(
        markup, url="https://harbour.example/records/index.html", markdown_mode=markdown_mode,
        images=images, hidden_text="drop", rendered=False,
    )  # fmt: skip
    return reading.page.content


def test_links_are_absolute_against_base_href_and_a_data_or_script_link_is_its_text_alone() -> None:
    content = _read(PAGE)
    assert "[list of ships](https://harbour.example/archive/2024/ships.html)" in content
    assert "[keeper's page](https://harbour.example/about#keeper)" in content
    assert "[charts](https://other.example/charts)" in content
    assert "a data link and a script link." in " ".join(content.split())  # the text stays, not the link
    assert "data:" not in content
    assert "javascript:" not in content
    assert "![" not in content  # images only when asked


def test_images_true_keeps_images_with_absolute_sources_and_never_a_data_uri() -> None:
    content = _read(PAGE, images=True)
    assert "![The pier in winter](https://harbour.example/archive/2024/pier.jpg)" in content
    assert "data:" not in content


def test_text_mode_has_no_links_or_images() -> None:
    content = _read(PAGE, images=True, markdown_mode=False)
    assert "list of ships" in content
    assert "](" not in content


# A story written as one block of text with line breaks, beside a paragraph about the paper: told to
# keep links, trafilatura takes that paragraph for the story (docs/decisions.md, "Markdown links").
BRIDGE = """<html><head><title>Bridge</title>
<script type="application/ld+json">{"@type": "NewsArticle"}</script></head>
<body><div><div><div id="content"><div><div><div>Following the spring floods, the town council plans
to rebuild the old river bridge with a wider deck in the first half of next year, according to minutes cited
by the local paper . A summary of the plan was shared with residents.
  <br>The plan says the deck will stay at two lanes, although given the traffic survey , the council would not
rule out a third lane for buses. Two regional firms are said to be among the bidders for the steel work.
 The new bridge will have a cycle path on its upstream side, largely based on the one built last year in the
next valley. Given that design, the path should prove far safer than the narrow footway used by walkers in
recent years.
 The bridge will also have new lights and a raised kerb. It is unclear if the old stone piers will be kept.
 The county engineer has previously said that the council will , including all the bridges on the ring road.
 It would be hardly surprising if the council replaced the old footbridge too, which has suffered from  since
its repair in 2016. The council continues to offer free parking to traders as part of its .
 The old bridge was last repaired in July, while the ramps were resurfaced in May.</div></div></div></div>
<div><div><ul><li><div class="text"><a>Ferry times </a><a></a></div></li></ul></div></div></div></div>
<div><div><div><p>The Valley Courier is read by a broad audience
of residents and visitors interested in
the towns and villages of the valley. We also run an active forum focused on
local transport, schools and the markets of the river towns. It is published in print and online every day
of the week.</p></div></div></div></body></html>"""
TIDES = f"""<html><head><title>Tides</title><script type="application/ld+json">{{"@type": "Article"}}</script>
</head><body><article><h1>Tides</h1><p>{LONG} The spring tides are listed <a href="/tides/spring">here</a>,
the neap tides <a href="/tides/neap">here</a>, and the <a href="/tides/tables"><b>full</b> tables</a> in the
office.</p><p>{LONG} The tables are printed each winter for the year ahead and sold at the harbour office.</p>
<p>{LONG} Ask the <a href="/staff"><span>harbour</span> <span>master</span></a> for older tables.</p>
</article></body></html>"""
_MARKS = range(0x17000, 0x18770)


def _without_targets(markdown: str) -> str:
    return re.sub(r"\]\([^)]*\)", "]", markdown)


def test_a_markdown_reading_reads_the_same_text_as_a_text_reading() -> None:
    markdown, text = _read(BRIDGE), _read(BRIDGE, markdown_mode=False)
    assert "raised kerb" in text
    assert token_f1(_without_targets(markdown), text) == 1.0  # the paragraph about the paper in neither


def test_each_link_keeps_its_own_target_and_no_mark_is_left() -> None:
    content = _read(TIDES)
    spring = content.index("[here](https://harbour.example/tides/spring)")
    assert content.index("[here](https://harbour.example/tides/neap)") > spring
    assert "[harbour master](https://harbour.example/staff)" in content
    assert not any(ord(char) in _MARKS for char in content)
    assert token_f1(_without_targets(content), _read(TIDES, markdown_mode=False)) > 0.99  # and the title


def test_a_page_that_writes_the_marks_script_keeps_it_and_its_links() -> None:
    tangut = "\U00018000\U00018001\U00017002"  # Tangut, the script the links' marks are taken from
    page = TIDES.replace("The tables are printed", f"The tables, {tangut} in Tangut, are printed")
    content = _read(page)
    assert tangut in content
    assert "[here](https://harbour.example/tides/neap)" in content


def test_spanned_cells_are_repeated_into_every_column_and_row_they_cover() -> None:
    content = _read(PAGE)
    assert "| Ship | Cargo and crew | Cargo and crew |" in content
    assert "| Aurora | timber | 12 |" in content
    assert "| Aurora | coal | 9 |" in content


def test_a_cell_spanning_rows_and_columns_fills_its_block_and_later_cells_move_right() -> None:
    tree = lxml.html.document_fromstring(
        "<table><tr><td rowspan=2 colspan=2>A</td><td>b</td></tr><tr><td>c</td></tr>"
        "<tr><td>d</td><td colspan=0>e</td><td rowspan=x>f</td></tr></table>"
    )
    repeat_spanned_cells(tree)
    rows = [[cell.text for cell in row] for row in tree.iter("tr")]
    assert rows == [["A", "A", "b"], ["A", "A", "c"], ["d", "e", "f"]]
    assert not tree.xpath("//*[@colspan or @rowspan]")


def test_code_blocks_keep_the_language_the_page_names() -> None:
    content = _read(PAGE)
    assert "```python\nfor ship in ships:\n    print(ship.name)\n```" in content
    for markup, language in (
        ('<pre class="lang-js"><code>x()</code></pre>', "js"),
        ('<div class="highlight-source-go"><pre>go run</pre></div>', "go"),
        ('<pre><code data-lang="Rust">fn main() {}</code></pre>', "rust"),
        ('<pre><code class="hljs">x = 1</code></pre>', None),
    ):
        block = lxml.html.fragment_fromstring(markup)
        pre = block if block.tag == "pre" else block.find("pre")
        assert code_language(pre) == language


def test_finish_takes_a_marker_no_fence_took_and_any_data_target_out() -> None:
    assert finish("\u27e6sift-language:python\u27e7\nx = 1") == "x = 1"
    assert finish("see ![a](data:image/png;base64,AAA) and [b](data:x)") == "see ![a] and [b]"


def test_links_images_and_tables_reach_every_door(agent, httpserver, open_loopback):
    caller, client = agent
    httpserver.expect_request("/records/index.html").respond_with_data(PAGE, content_type="text/html")
    url = httpserver.url_for("/records/index.html")
    base = httpserver.url_for("/archive/2024/")
    get = client.get("/v1/fetch", url=url, images=True).json()
    post = client.post("/v1/fetch", {"url": url, "options": {"images": True}}).json()
    batch = fetch_target(
        Caller(caller.name, caller.caller_class), parse_target({"url": url, "options": {"images": True}})
    )
    for content in (get["content"], post["content"], batch["content"]):
        assert f"[list of ships]({base}ships.html)" in content
        assert f"![The pier in winter]({base}pier.jpg)" in content
        assert "| Aurora | coal | 9 |" in content
        assert "```python" in content
        assert "data:" not in content
    without = client.get("/v1/fetch", url=url).json()
    assert "![" not in without["content"]
    assert without["content_sha256"] != get["content_sha256"]
