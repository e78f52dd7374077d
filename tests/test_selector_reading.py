"""How a page's selectors are read before they are matched (``fetch/html/selector_matching.py``,
``stylesheets.py``): a plain selector read without cssselect says exactly what cssselect's
reading says, and a rule is set aside unread only when it cannot match the page, whatever names
its classes and ids have."""

from __future__ import annotations

import lxml.html
import pytest

from fetch.html import selector_matching
from fetch.html.hidden import drop_hidden
from fetch.html.selector_matching import Selector, parse_selectors

PLAIN = [
    "p",
    "DIV.Note",
    "*",
    "*.hide",
    ".a.b .c",
    "#main > p.x.y",
    "ul  >  li + li ~ li a",
    "a\t>\nb",
    "h1,h2 , h3",
    ".é-note",
    "-x-tag .-y",
    "p#z.a",
]
NOT_PLAIN = [
    "a:hover",
    "p[hidden]",
    ".a\\:b",
    "a >",
    "a,",
    "#a#b",
    ".5a",
    "svg|rect",
    "p::before",
    ".x:not(.y)",
]


def _read(selector: Selector) -> tuple[object, ...]:
    return (selector.parts, selector.key, selector.needs, selector.specificity)


def _by_cssselect(text: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    with monkeypatch.context() as patched:
        patched.setattr(selector_matching, "_plain_selectors", lambda text: None)
        return [_read(selector) for selector in parse_selectors(text)]


@pytest.mark.parametrize("text", PLAIN)
def test_a_plain_selector_reads_as_cssselect_reads_it(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = selector_matching._plain_selectors(text)
    assert fast is not None
    assert [_read(selector) for selector in fast] == _by_cssselect(text, monkeypatch)


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_any_other_selector_is_left_to_cssselect(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert selector_matching._plain_selectors(text) is None
    assert [_read(selector) for selector in parse_selectors(text)] == _by_cssselect(text, monkeypatch)


@pytest.mark.parametrize(
    ("css", "element"),
    [
        (".note\U0001f600 { display: none }", '<p class="note\U0001f600">{}</p>'),
        (".a\u00e9 { display: none }", '<p class="a\u00e9">{}</p>'),
        ("DIV.Note P { display: none }", '<div class="Note"><p>{}</p></div>'),
        ("main > p#x.y.z { visibility: hidden }", '<main><p id="x" class="z y">{}</p></main>'),
        ("*.hide, .absent { font-size: 0 }", '<p class="hide">{}</p>'),
        ("section:first-child { display: none }", "<section>{}</section>"),
    ],
)
def test_a_rule_that_matches_is_applied_whatever_its_names(css: str, element: str) -> None:
    tree = lxml.html.document_fromstring(
        f"<html><head><style>{css}</style></head><body>{element.format('secret words')}"
        "<p>Visible words stay.</p></body></html>"
    )
    assert drop_hidden(tree, rendered=False) == len("secret words")
    assert "secret" not in tree.text_content()
    assert "Visible words stay." in tree.text_content()
