"""The block model: which lines of a page's reading are main content (fetch/html/block_filter.py),
its trees exported by bench/train_blocks.py and evaluated without scikit-learn (fetch/html/forest.py)."""

from __future__ import annotations

import random

import lxml.html
import numpy as np
from sklearn.ensemble import GradientBoostingClassifier

from bench import train_blocks
from fetch.html import forest
from fetch.html.block_filter import FEATURES, PageBlocks, line_rows

PAGE = (
    "<html><body><nav class='site-menu'><a href='/'>Home</a> <a href='/news'>News</a></nav>"
    "<div class='post-content'>"
    "<p>The river rose by two metres overnight, and the town closed its bridges.</p>"
    "<p>Residents were told to stay indoors.</p></div>"
    "<footer id='footer'><p>Copyright 2026 The Daily River</p></footer></body></html>"
)


def feature(row: list[float], name: str) -> float:
    return row[FEATURES.index(name)]


def test_each_line_of_a_reading_is_found_again_with_the_element_and_names_around_it() -> None:
    tree = lxml.html.document_fromstring(PAGE)
    lines = ["Home News", "The river rose by two metres overnight, and the town closed its bridges.",
             "Copyright 2026 The Daily River", "A line the page never holds"]  # fmt: skip

    menu, story, footer, unknown = line_rows(lines, PageBlocks(tree), "article", 200)

    assert feature(menu, "in_nav") == 1
    assert feature(menu, "name_menu") == 1
    assert feature(menu, "link_share") > 0.8
    assert feature(story, "tag_p") == 1
    assert feature(story, "name_content") == 1
    assert feature(story, "in_nav") == 0
    assert feature(story, "ends_sentence") == 1
    assert feature(story, "link_share") == 0
    assert feature(footer, "in_footer") == 1
    assert feature(footer, "name_footer") == 1
    assert feature(unknown, "matched") == 0
    assert feature(unknown, "depth") == -1
    assert all(feature(row, "kind_article") == 1 for row in (menu, story, footer, unknown))


def test_the_exported_trees_give_scikit_learns_own_chances() -> None:
    rng = np.random.default_rng(0)
    rows = rng.random((300, len(FEATURES)))
    labels = (rows[:, 0] + rows[:, 5] > 1).astype(int)
    model = GradientBoostingClassifier(n_estimators=20, max_depth=3, learning_rate=0.1, random_state=0)
    model.fit(rows, labels)
    mine = forest.from_dict(train_blocks.exported(model))

    theirs = model.predict_proba(rows)[:, 1]
    for row, chance in random.Random(0).sample(list(zip(rows.tolist(), theirs, strict=True)), 50):
        assert abs(mine.shares(row)["main"] - chance) < 1e-4


def test_the_committed_block_model_reads_the_features_the_service_measures() -> None:
    model = forest.load("block_main")

    assert model.features == FEATURES
    assert model.classes == ("other", "main")
    tree = lxml.html.document_fromstring(PAGE)
    rows = line_rows(["Home News", "Residents were told to stay indoors."], PageBlocks(tree), "page", 200)
    assert all(0 < model.shares(row)["main"] < 1 for row in rows)
