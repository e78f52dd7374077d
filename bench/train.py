"""Build the page-type model, ``fetch/html/models/page_type.json``, from the labelled pages.

    .venv/bin/python -m bench.train [--data DIR] [--folds 5]      (``make model`` runs it)

What it learns from: ``wcxb-train`` (657 pages, one a site) and the ``tune`` half of
``wcxb-dev`` (``bench.quality.half_of``), never its ``check`` half, which stays the test set.
Each page's kind is WCXB's label (article, collection, documentation, forum, listing, product,
service).

Features: ``fetch.html.page_type.FEATURES``, measured by ``page_features`` on the page as the
sandbox child sees it (hidden text dropped, overlays and related sections removed): schema.org
and Open Graph types, URL words, link share, counts of paragraphs, list items, code blocks,
tables, forms and buttons, class and id words, prices and dates, the longest run of siblings
built alike.

Model: scikit-learn's ``GradientBoostingClassifier`` (shallow trees, one set a kind), each page
weighted so that every kind weighs the same (the pages are mostly articles). It is written as
plain lists (``fetch.html.forest``), which the service evaluates without scikit-learn; the
script checks that the exported trees give scikit-learn's own shares on every page.

Evaluation, printed: cross-validated accuracy by site (group k-fold on the page's host: no site
is both learnt and judged), per kind, on all pages and on the tune half's; then, trained on
everything, the accuracy on the check half, quoted and never used to choose anything.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")

import numpy as np
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.model_selection import GroupKFold

from bench import data
from bench.quality import LabelledPage, benchmark_pages
from fetch.documents.sniff import clean_text, decode_text
from fetch.html import forest, hidden, markdown
from fetch.html import reader as _reader  # noqa: F401 — the child's parser set-up, as it reads
from fetch.html.main_content import _parse, prepare_page
from fetch.html.page_type import FEATURES, PAGE_TYPES, page_features

TRAIN = "wcxb-train"
MODEL = forest.MODELS / "page_type.json"
# The boosting's size: enough trees to learn the kinds from ~750 pages, shallow enough to stay
# small (the JSON) and quick (each tree is a few comparisons).
TREES = 60
DEPTH = 3
LEARNING_RATE = 0.1
SEED = 0


@dataclass(frozen=True)
class Page:
    name: str
    page_type: str
    host: str
    half: str  # "tune", "check" or "train"
    features: list[float]


def labelled_pages(pages: list[LabelledPage]) -> list[Page]:
    """The labelled pages with their features, measured on each page as the sandbox child reads it."""
    found = []
    for page in pages:
        tree = _parse(clean_text(decode_text(page.body, None)))
        if tree is None:
            continue
        hidden.drop_hidden(tree, rendered=False, keep=False)
        markdown.prepare(tree, url=page.url, markdown=False, images=False)
        prepare_page(tree)
        host = (urlsplit(page.url).hostname or page.name).removeprefix("www.")
        found.append(Page(page.name, page.page_type, host, page.half, page_features(tree, page.url)))
    return found


def learning_pages(
    parser: argparse.ArgumentParser, folder: Path
) -> tuple[list[LabelledPage], list[LabelledPage]]:
    """The pages learnt from (wcxb-dev's tune half, then wcxb-train marked "train") and the check half."""
    dev = benchmark_pages(data.required(parser, folder, data.WCXB), halves=True)
    train = [replace(page, half="train") for page in benchmark_pages(data.required(parser, folder, TRAIN))]
    return [page for page in dev if page.half == "tune"] + train, [
        page for page in dev if page.half == "check"
    ]


def folds(pages: list[Page], count: int) -> Iterator[tuple[list[Page], list[Page]]]:
    """The pages to learn from and the pages to judge, ``count`` times: no site in both."""
    groups = [page.host for page in pages]
    for learn, judge in GroupKFold(n_splits=count).split(_rows(pages), groups=groups):
        yield [pages[n] for n in learn], [pages[n] for n in judge]


def fitted(pages: list[Page]) -> GradientBoostingClassifier:
    counts = Counter(page.page_type for page in pages)
    weights = np.array([len(pages) / (len(counts) * counts[page.page_type]) for page in pages])
    model = GradientBoostingClassifier(
        n_estimators=TREES, max_depth=DEPTH, learning_rate=LEARNING_RATE, subsample=0.8, random_state=SEED
    )
    return model.fit(_rows(pages), [page.page_type for page in pages], sample_weight=weights)


def cross_validated(pages: list[Page], count: int) -> list[str]:
    """Each page's predicted kind by a model that saw no page of its site."""
    predicted: dict[str, str] = {}
    for learn, judge in folds(pages, count):
        model = fitted(learn)
        for page, kind in zip(judge, model.predict(_rows(judge)), strict=True):
            predicted[page.name] = str(kind)
    return [predicted[page.name] for page in pages]


def exported(model: GradientBoostingClassifier) -> dict[str, Any]:
    """The model as ``fetch.html.forest`` reads it."""
    classes = [str(name) for name in model.classes_]
    probe = np.zeros((1, len(FEATURES)))
    sums = [sum(stage[c].predict(probe)[0] for stage in model.estimators_) for c in range(len(classes))]
    raw = model.decision_function(probe)[0]
    base = [float(raw[c] - LEARNING_RATE * sums[c]) for c in range(len(classes))]
    trees = [[exported_tree(stage[c]) for stage in model.estimators_] for c in range(len(classes))]
    return {
        "classes": classes,
        "features": list(FEATURES),
        "base": base,
        "scale": LEARNING_RATE,
        "trees": trees,
    }


def exported_tree(regressor: object) -> dict[str, list[float]]:
    """One fitted regression tree as the plain lists ``fetch.html.forest`` evaluates."""
    tree = regressor.tree_  # type: ignore[attr-defined]
    return {
        "feature": [int(x) for x in tree.feature],
        "threshold": [float(x) for x in tree.threshold],
        "left": [int(x) for x in tree.children_left],
        "right": [int(x) for x in tree.children_right],
        "value": [round(float(x), 6) for x in tree.value[:, 0, 0]],
    }


def _rows(pages: list[Page]) -> np.ndarray:
    return np.array([page.features for page in pages])


def accuracy_table(title: str, pages: list[Page], predicted: list[str]) -> None:
    print(f"\n{title}: {len(pages)} pages, accuracy {_share(pages, predicted):.3f}")
    for kind in PAGE_TYPES:
        chosen = [n for n, page in enumerate(pages) if page.page_type == kind]
        if chosen:
            wrong = Counter(predicted[n] for n in chosen if predicted[n] != kind).most_common(2)
            right = sum(predicted[n] == kind for n in chosen) / len(chosen)
            print(f"  {kind:<14} {right:.2f} of {len(chosen):>3}  mistaken for: {wrong}")


def _share(pages: list[Page], predicted: list[str]) -> float:
    return sum(page.page_type == kind for page, kind in zip(pages, predicted, strict=True)) / len(pages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data.add_argument(parser)
    parser.add_argument("--folds", type=int, default=5, help="folds of the cross-validation by site")
    args = parser.parse_args()
    learning, checking = learning_pages(parser, args.data)
    learnt, check = labelled_pages(learning), labelled_pages(checking)
    predicted = cross_validated(learnt, args.folds)
    accuracy_table(f"cross-validated by site ({args.folds} folds), tune half and {TRAIN}", learnt, predicted)
    tune = [n for n, page in enumerate(learnt) if page.half == "tune"]
    accuracy_table("the same, tune half's pages", [learnt[n] for n in tune], [predicted[n] for n in tune])
    model = fitted(learnt)
    accuracy_table("trained on all of them, check half", check, [str(k) for k in model.predict(_rows(check))])
    export = exported(model)
    MODEL.parent.mkdir(exist_ok=True)
    MODEL.write_text(json.dumps(export, separators=(",", ":")) + "\n", encoding="utf-8")
    _verify(model, learnt + check)
    print(f"\nwrote {MODEL.relative_to(Path.cwd())} ({MODEL.stat().st_size // 1024} KiB)")


def _verify(model: GradientBoostingClassifier, pages: list[Page]) -> None:
    """The exported trees give scikit-learn's own shares on every page."""
    exported_forest = forest.load("page_type")
    theirs = model.predict_proba(_rows(pages))
    for page, row in zip(pages, theirs, strict=True):
        mine = exported_forest.shares(page.features)
        for name, share in zip(model.classes_, row, strict=True):
            if abs(mine[str(name)] - share) > 1e-4:
                raise SystemExit(f"exported model differs from scikit-learn's on {page.name}")


if __name__ == "__main__":
    main()
