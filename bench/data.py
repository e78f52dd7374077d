"""The data sets the benchmarks read: outside the repository, read in place, never copied into it.

They live in a ``bench-data`` directory given with ``--data``; by default the one named by the
``SIFT_BENCH_DATA`` environment variable, else ``../shared/bench-data`` beside the repository's
checkout, wherever that is (a worktree elsewhere names it with either).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

BESIDE_CHECKOUT = Path(__file__).resolve().parents[1].parent / "shared" / "bench-data"
# ScrapingHub's article-extraction benchmark: html/<id>.html.gz and ground-truth.json
# ({id: {"articleBody": ..., "url": ...}}).
ARTICLES = "article-extraction"
# The development split of WCXB, the Web Content Extraction Benchmark: pages of seven types, laid
# out as the article benchmark, with a "page_type" beside each page's text.
WCXB = "wcxb-dev"


def default_dir() -> Path:
    """``SIFT_BENCH_DATA`` when set, else the directory beside the checkout."""
    return Path(os.environ.get("SIFT_BENCH_DATA") or BESIDE_CHECKOUT)


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=Path,
        default=default_dir(),
        metavar="DIR",
        help=f"the bench-data directory, holding {ARTICLES}/ and {WCXB}/ (default: $SIFT_BENCH_DATA, "
        "else ../shared/bench-data beside the repository; here %(default)s)",
    )


def found(data: Path, name: str) -> Path | None:
    """The data set ``name`` under ``data`` (html/ and ground-truth.json), or None without it."""
    folder = data / name
    if (folder / "html").is_dir() and (folder / "ground-truth.json").is_file():
        return folder
    return None


def required(parser: argparse.ArgumentParser, data: Path, name: str) -> Path:
    """The data set ``name`` under ``data``; without it, the bench stops naming ``--data``."""
    folder = found(data, name)
    if folder is None:
        parser.error(
            f"no {name} data set in {data} (html/ and ground-truth.json): "
            "give the bench-data directory that holds it with --data DIR"
        )
    return folder


def articles(parser: argparse.ArgumentParser, data: Path) -> Path:
    """The article-extraction set under ``data``; without it, the bench stops naming ``--data``."""
    return required(parser, data, ARTICLES)
