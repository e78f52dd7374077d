"""Build the block model, ``fetch/html/models/block_main.json``: which lines of a page's reading
are its main content (``fetch.html.block_filter``).

    .venv/bin/python -m bench.train_blocks [--data DIR] [--folds 5]     (``make model`` runs it)

What it learns from: the pages ``bench/train.py`` learns from (``wcxb-train`` and the tune half of
``wcxb-dev``), never the check half. Each page is read as the sandbox child reads it, up to the
reading ``main_content`` settles on; each paragraph of that reading is a line, labelled main
content when at least half of its word trigrams (its words, for a line of fewer than three) are
in WCXB's main text of the page. Features: ``fetch.html.block_filter.FEATURES``.

Model: scikit-learn's ``GradientBoostingClassifier`` (shallow trees, one class: main content),
exported as plain lists (``fetch.html.forest``) and checked to give scikit-learn's own chances.

Evaluation, printed: cross-validated by site (group k-fold on the page's host), the mean word F1
of the readings with the lines under each threshold dropped, per page type, beside the reading as
it is, with a 95% interval of the change by a paired bootstrap; the threshold kept is the one
with the best cross-validated mean. Then, trained on all of them, the same on the check half,
quoted and never used to choose anything.
"""

from __future__ import annotations

# ruff: noqa: E402 — Django is set up before bench.quality, which reaches the models, is imported
import argparse
import json
import os
import pickle
import random
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")

import django

django.setup()

import numpy as np
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.model_selection import GroupKFold

from bench import data
from bench.quality import LabelledPage, score
from bench.train import exported_tree, learning_pages
from fetch.documents.sniff import clean_text, decode_text
from fetch.html import block_filter, forest, hidden, markdown
from fetch.html import reader as _reader  # noqa: F401 — the child's parser set-up, as it reads
from fetch.html.block_text import page_chars
from fetch.html.declared_kind import page_kind
from fetch.html.line_cleanup import drop_calls_to_action
from fetch.html.main_content import _main_content, _parse, prepare_page

MODEL = forest.MODELS / "block_main.json"
TREES = 80
DEPTH = 3
LEARNING_RATE = 0.1
SEED = 0
MAIN_SHARE = 0.5
THRESHOLDS = (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
_TOKEN = re.compile(r"\w+")


@dataclass
class PageLines:
    name: str
    page_type: str
    host: str
    half: str
    truth: str
    lines: list[str]
    rows: list[list[float]]
    labels: list[int]


def page_lines(page: LabelledPage) -> PageLines | None:
    """The page's reading, line by line, with each line's features and label."""
    tree = _parse(clean_text(decode_text(page.body, None)))
    if tree is None:
        return None
    hidden.drop_hidden(tree, rendered=False, keep=False)
    markdown.prepare(tree, url=page.url, markdown=False, images=False)
    prepare_page(tree)
    content = drop_calls_to_action(_main_content(tree, markdown=False))
    lines = block_filter.split_lines(content)
    rows = block_filter.line_rows(lines, block_filter.PageBlocks(tree), page_kind(tree), page_chars(tree))
    host = (urlsplit(page.url).hostname or page.name).removeprefix("www.")
    grams = _grams(page.truth, 3) | _grams(page.truth, 1)
    labels = [int(_found_share(line, grams) >= MAIN_SHARE) for line in lines]
    return PageLines(page.name, page.page_type, host, page.half, page.truth, lines, rows, labels)


def _grams(text: str, size: int) -> set[tuple[str, ...]]:
    words = _TOKEN.findall(text.lower())
    return {tuple(words[n : n + size]) for n in range(len(words) - size + 1)}


def _found_share(line: str, grams: set[tuple[str, ...]]) -> float:
    size = 3 if len(_TOKEN.findall(line)) >= 3 else 1
    own = _grams(line, size)
    return sum(gram in grams for gram in own) / len(own) if own else 1.0


def fitted(pages: list[PageLines]) -> GradientBoostingClassifier:
    rows = np.array([row for page in pages for row in page.rows])
    labels = np.array([label for page in pages for label in page.labels])
    model = GradientBoostingClassifier(
        n_estimators=TREES, max_depth=DEPTH, learning_rate=LEARNING_RATE, subsample=0.8, random_state=SEED
    )
    # Each line weighs its words: the F1 the lines serve counts words, not lines.
    weights = np.maximum(1.0, rows[:, block_filter.FEATURES.index("words")])
    return model.fit(rows, labels, sample_weight=weights)


def chances(model: GradientBoostingClassifier, page: PageLines) -> list[float]:
    return [float(p) for p in model.predict_proba(np.array(page.rows))[:, 1]] if page.rows else []


def kept_f1(page: PageLines, chance: list[float], threshold: float) -> float:
    kept = [line for line, p in zip(page.lines, chance, strict=True) if p >= threshold]
    if not kept:  # the service keeps the reading whole rather than nothing
        kept = page.lines
    return score("\n".join(kept), page.truth).f1


def cross_validated(pages: list[PageLines], count: int) -> dict[str, list[float]]:
    """Each page's lines' chances by a model that saw no page of its site."""
    found: dict[str, list[float]] = {}
    groups = [page.host for page in pages]
    for learn, judge in GroupKFold(n_splits=count).split(np.zeros(len(pages)), groups=groups):
        model = fitted([pages[n] for n in learn])
        for n in judge:
            found[pages[n].name] = chances(model, pages[n])
    return found


def effect_table(
    title: str, pages: list[PageLines], chance: dict[str, list[float]], threshold: float
) -> None:
    rng = random.Random(0)
    print(f"\n{title}: drop lines under {threshold}; mean F1 before -> after, change [95% interval]")
    kinds = sorted({page.page_type for page in pages})
    for kind in [*kinds, "all"]:
        chosen = [page for page in pages if kind in ("all", page.page_type)]
        before = [kept_f1(page, chance[page.name], 0.0) for page in chosen]
        after = [kept_f1(page, chance[page.name], threshold) for page in chosen]
        changes = [a - b for a, b in zip(after, before, strict=True)]
        means = sorted(sum(rng.choice(changes) for _ in changes) / len(changes) for _ in range(2000))
        flag = " *" if means[1949] < 0 else ""
        print(
            f"  {kind:<14} {len(chosen):>4}  {_mean(before):.3f} -> {_mean(after):.3f}"
            f"  {_mean(changes):+.3f} [{means[50]:+.3f}, {means[1949]:+.3f}]{flag}"
        )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def best_threshold(pages: list[PageLines], chance: dict[str, list[float]]) -> float:
    figures = {t: _mean([kept_f1(page, chance[page.name], t) for page in pages]) for t in THRESHOLDS}
    print("cross-validated mean F1 by threshold: " + ", ".join(f"{t}: {f:.4f}" for t, f in figures.items()))
    return max(figures, key=lambda t: (round(figures[t], 4), -t))


def exported(model: GradientBoostingClassifier) -> dict[str, object]:
    """The model as ``fetch.html.forest`` reads it: "other" scores zero, "main" its log-odds."""
    probe = np.zeros((1, len(block_filter.FEATURES)))
    total = sum(stage[0].predict(probe)[0] for stage in model.estimators_)
    base = float(model.decision_function(probe)[0] - LEARNING_RATE * total)
    trees = [exported_tree(stage[0]) for stage in model.estimators_]
    return {
        "classes": ["other", "main"],
        "features": list(block_filter.FEATURES),
        "base": [0.0, base],
        "scale": LEARNING_RATE,
        "trees": [[], trees],
    }


def _verify(model: GradientBoostingClassifier, pages: list[PageLines]) -> None:
    """The exported trees give scikit-learn's own chances on every line."""
    mine = forest.load("block_main")
    for page in pages:
        for row, theirs in zip(page.rows, chances(model, page), strict=True):
            if abs(mine.shares(row)["main"] - theirs) > 1e-4:
                raise SystemExit(f"exported model differs from scikit-learn's on {page.name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data.add_argument(parser)
    parser.add_argument("--folds", type=int, default=5, help="folds of the cross-validation by site")
    parser.add_argument("--check", action="store_true", help="quote the check half too (at the end only)")
    parser.add_argument("--cache", type=Path, help="keep the measured lines in this file (development)")
    args = parser.parse_args()
    if args.cache and args.cache.exists():
        learnt, check = pickle.loads(args.cache.read_bytes())
    else:
        learning, checking = learning_pages(parser, args.data)
        learnt = [found for page in learning if (found := page_lines(page))]
        check = [found for page in checking if (found := page_lines(page))]
        if args.cache:
            args.cache.write_bytes(pickle.dumps((learnt, check)))
    chance = cross_validated(learnt, args.folds)
    threshold = best_threshold(learnt, chance)
    effect_table(f"cross-validated by site ({args.folds} folds)", learnt, chance, threshold)
    model = fitted(learnt)
    if args.check:
        check_chance = {page.name: chances(model, page) for page in check}
        effect_table("trained on all of them, check half", check, check_chance, threshold)
    MODEL.write_text(json.dumps(exported(model), separators=(",", ":")) + "\n", encoding="utf-8")
    _verify(model, learnt[:100])
    print(
        f"\nwrote {MODEL.relative_to(Path.cwd())} ({MODEL.stat().st_size // 1024} KiB), threshold {threshold}"
    )


if __name__ == "__main__":
    main()
