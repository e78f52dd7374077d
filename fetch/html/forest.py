"""A tree ensemble exported by ``bench/train.py``, evaluated in pure Python on one thread.

The model is trained with scikit-learn (docs/dependencies.md), which the service never imports:
its trees are written to a JSON file beside this module (``fetch/html/models/``) as flat lists,
and read here once, when first asked for. A tree is four lists indexed by node: the feature a
node tests (-1 at a leaf), its threshold, its left child (taken when the feature is at most the
threshold) and its right child; a leaf's value is in ``values`` (one score per class). The
ensemble's score for a class is its ``base`` plus the sum of its trees' leaf values
(gradient boosting: the scores are log-odds, turned into shares by a softmax).

The sandbox child runs it: it imports nothing but the standard library.
"""

from __future__ import annotations

import json
import math
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODELS = Path(__file__).resolve().parent / "models"


@dataclass(frozen=True)
class Tree:
    feature: tuple[int, ...]
    threshold: tuple[float, ...]
    left: tuple[int, ...]
    right: tuple[int, ...]
    value: tuple[float, ...]

    def leaf_value(self, row: list[float]) -> float:
        node = 0
        feature, threshold, left, right = self.feature, self.threshold, self.left, self.right
        while feature[node] >= 0:
            node = left[node] if row[feature[node]] <= threshold[node] else right[node]
        return self.value[node]


@dataclass(frozen=True)
class Forest:
    """Boosted trees: ``trees[c]`` are class ``classes[c]``'s, ``base[c]`` its starting score."""

    classes: tuple[str, ...]
    features: tuple[str, ...]
    base: tuple[float, ...]
    trees: tuple[tuple[Tree, ...], ...]
    scale: float

    def shares(self, row: list[float]) -> dict[str, float]:
        """Each class's share (softmax of its score) for the feature values ``row``."""
        # The trees were grown on single-precision values: a value is compared as one.
        row = array("f", row).tolist()
        scores = [
            base + self.scale * sum(tree.leaf_value(row) for tree in trees)
            for base, trees in zip(self.base, self.trees, strict=True)
        ]
        top = max(scores)
        weights = [math.exp(score - top) for score in scores]
        total = sum(weights)
        return {name: weight / total for name, weight in zip(self.classes, weights, strict=True)}


def load(name: str) -> Forest:
    """The model ``models/<name>.json`` as written by ``bench/train.py``."""
    return from_dict(json.loads((MODELS / f"{name}.json").read_text(encoding="utf-8")))


def from_dict(raw: dict[str, Any]) -> Forest:
    """A model from its JSON form (``bench/train.py``'s ``exported``)."""
    return Forest(
        classes=tuple(raw["classes"]),
        features=tuple(raw["features"]),
        base=tuple(float(x) for x in raw["base"]),
        trees=tuple(tuple(_tree(tree) for tree in trees) for trees in raw["trees"]),
        scale=float(raw["scale"]),
    )


def _tree(raw: dict[str, Any]) -> Tree:
    # The lists as JSON gives them (ints and floats): converting each number again would double
    # the time the model takes to load.
    return Tree(
        feature=tuple(raw["feature"]),
        threshold=tuple(raw["threshold"]),
        left=tuple(raw["left"]),
        right=tuple(raw["right"]),
        value=tuple(raw["value"]),
    )
