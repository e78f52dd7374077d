from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import lxml.html
import pytest
from lxml import etree

from fetch.html.element_classes import HTML_CLASSES, lxml_lookup, use_lxml_lookup

PAGE = (
    "<!DOCTYPE html><html><head><title>t</title></head><body><!-- a comment --><?pi x?>"
    "<form><label>Name <input name=q></label><select><option>a</option></select>"
    "<textarea>t</textarea></form><div><p>text</p><svg><path/></svg><my-widget></my-widget></div>"
    "</body></html>"
)


def _classes(parser: etree.HTMLParser) -> list[type]:
    tree = lxml.html.document_fromstring(PAGE, parser=parser)
    return [type(node) for node in tree.iter()]


def test_the_classes_named_are_those_lxml_html_gives_elements_of_their_own() -> None:
    assert lxml.html.HtmlElementClassLookup()._element_classes == HTML_CLASSES


def test_the_lxml_lookup_gives_every_node_the_class_lxml_html_gives_it() -> None:
    parser = lxml.html.HTMLParser()
    parser.set_element_class_lookup(lxml_lookup())

    assert _classes(parser) == _classes(lxml.html.HTMLParser())
    assert lxml.html.FormElement in _classes(parser)
    assert lxml.html.HtmlComment in _classes(parser)


@pytest.mark.parametrize("make", [copy.copy, copy.deepcopy])
def test_a_copy_of_a_page_keeps_the_classes_of_the_parser_that_read_it(make: Callable[[Any], Any]) -> None:
    parser = lxml.html.HTMLParser()
    use_lxml_lookup(parser)
    tree = lxml.html.document_fromstring(PAGE, parser=parser)

    assert [type(node) for node in make(tree).iter()] == _classes(lxml.html.HTMLParser())
