"""The data sets the benchmarks read: outside the repository, read in place, never copied into it.

They live in a ``bench-data`` directory given with ``--data``; by default ``../shared/bench-data``
beside the repository's checkout, wherever that is.
"""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "bench-data"
# ScrapingHub's article-extraction benchmark: html/<id>.html.gz and ground-truth.json
# ({id: {"articleBody": ..., "url": ...}}).
ARTICLES = "article-extraction"


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DIR,
        metavar="DIR",
        help=f"the bench-data directory, holding {ARTICLES}/ (default: ../shared/bench-data "
        "beside the repository, here %(default)s)",
    )


def articles(parser: argparse.ArgumentParser, data: Path) -> Path:
    """The article-extraction set under ``data``; without it, the bench stops naming ``--data``."""
    found = data / ARTICLES
    if not (found / "html").is_dir() or not (found / "ground-truth.json").is_file():
        parser.error(
            f"no {ARTICLES} data set in {data} (html/ and ground-truth.json): "
            "give the bench-data directory that holds it with --data DIR"
        )
    return found
