"""The page-type model: its exported trees evaluated without scikit-learn (fetch/html/forest.py),
its features those the page code measures; and the kind a page declares, which it is read as."""

from __future__ import annotations

import json

import lxml.html

from fetch.html import forest
from fetch.html.declared_kind import declared_kind
from fetch.html.page_type import FEATURES, PAGE_TYPES, page_features, page_type


def test_the_committed_model_reads_the_features_the_page_code_measures_and_gives_the_seven_kinds() -> None:
    raw = json.loads((forest.MODELS / "page_type.json").read_text(encoding="utf-8"))
    assert tuple(raw["features"]) == FEATURES
    assert sorted(raw["classes"]) == sorted(PAGE_TYPES)


def test_a_forest_adds_its_trees_leaf_values_to_each_class_base_and_shares_them_by_softmax(
    tmp_path, monkeypatch
):
    # One stump a class: feature 0 at most 0.5 goes left.
    stump = {"feature": [0, -1, -1], "threshold": [0.5, 0, 0], "left": [1, -1, -1], "right": [2, -1, -1]}
    model = {
        "classes": ["forum", "product"],
        "features": ["f"],
        "base": [0.0, 0.0],
        "scale": 1.0,
        "trees": [[{**stump, "value": [0, 2.0, -2.0]}], [{**stump, "value": [0, -2.0, 2.0]}]],
    }
    (tmp_path / "toy.json").write_text(json.dumps(model))
    monkeypatch.setattr(forest, "MODELS", tmp_path)
    toy = forest.load("toy")
    low, high = toy.shares([0.0]), toy.shares([1.0])
    assert low["forum"] > 0.98
    assert high["product"] > 0.98
    assert abs(sum(low.values()) - 1) < 1e-9


def test_a_page_is_measured_by_every_feature_and_given_one_of_the_seven_kinds() -> None:
    tree = lxml.html.document_fromstring(
        "<html><body><div class='thread'>"
        + "".join(
            f"<div class='post'><span class='author'>user{n}</span>"
            f"<p>Reply {n}: the pump needs a new seal.</p></div>"
            for n in range(6)
        )
        + "</div></body></html>"
    )
    url = "https://boats.example/forum/thread/123"
    assert len(page_features(tree, url)) == len(FEATURES)
    kind, share = page_type(tree, url)
    assert kind in PAGE_TYPES
    assert 0 < share <= 1


def test_a_page_is_read_as_the_kind_it_names_and_one_that_names_none_is_a_page() -> None:
    tree = lxml.html.document_fromstring(
        '<html><head><meta property="og:type" content="product"></head>'
        "<body><p>Ten words of text.</p></body></html>"
    )
    assert declared_kind(tree, set()) == "product"
    assert declared_kind(tree, {"DiscussionForumPosting"}) == "forum"
    bare = lxml.html.document_fromstring("<html><body><p>Ten words of text.</p></body></html>")
    assert declared_kind(bare, set()) == "page"
