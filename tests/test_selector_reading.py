"""How a page's rules are screened before they are matched (``fetch/html/stylesheets.py``): a
rule is set aside unread only when it cannot match the page, whatever names its classes and ids
have."""

from __future__ import annotations

import lxml.html
import pytest

from fetch.html.hidden import drop_hidden


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
