"""Word-F1 of sift's HTML extraction on articles and on pages that are not articles.

Two labelled sets, each page scored by the token F1 of ``bench.extract`` (bag of lower-cased
``\\w+`` tokens, per page, then averaged):

- the article-extraction benchmark, read from the bench-data directory (``--data``; see
  ``bench/data.py``);
- ``bench/pages/``: forum threads, Q&A pages, documentation, product pages, listings and other
  non-article pages written for sift, with the real-world boilerplate around them (navigation,
  cookie banners, sidebars, comment forms, footers); ``truth.json`` holds each page's main text.
  The page title is not part of it: the envelope carries it (``title``).

For each set it prints the mean F1 (and precision, recall) of sift text mode, sift markdown mode
(both through ``fetch.extract.extract``, in the sandbox child as the service runs it) and
trafilatura called directly with its defaults, and the CPU milliseconds per page each takes in
one process: sift's ``html_text`` called in-process on the decoded page (what the child runs),
trafilatura on the bytes, and their ratio. bench/extract.py measures the service's rates.

    .venv/bin/python -m bench.quality [--data DIR] [--pages-only] [--worst N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")

import trafilatura

from bench import data
from bench.extract import load, sift
from fetch.html_text import html_text
from fetch.sniff import clean_text, decode_text

PAGES = Path(__file__).resolve().parent / "pages"
_TOKEN = re.compile(r"\w+")

# (name, html bytes, url, expected text)
Page = tuple[str, bytes, str, str]


@dataclass(frozen=True)
class Score:
    precision: float
    recall: float
    f1: float


def score(predicted: str, truth: str) -> Score:
    """Bag-of-words precision, recall and F1 (the F1 is ``bench.extract.token_f1``)."""
    got, want = Counter(_TOKEN.findall(predicted.lower())), Counter(_TOKEN.findall(truth.lower()))
    common = sum((got & want).values())
    if not got or not want or not common:
        empty = float(not got and not want)
        return Score(empty, empty, empty)
    precision, recall = common / sum(got.values()), common / sum(want.values())
    return Score(precision, recall, 2 * precision * recall / (precision + recall))


def non_article_pages(folder: Path = PAGES) -> list[Page]:
    """The labelled non-article pages: ``<name>.html`` beside ``truth.json`` ({name: text})."""
    truth: dict[str, str] = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
    return [
        (name, (folder / f"{name}.html").read_bytes(), f"https://pages.example/{name}", text)
        for name, text in sorted(truth.items())
    ]


def article_pages(articles: Path) -> list[Page]:
    return [(page.url, page.body, page.url, page.truth) for page in load(articles)]


def trafilatura_direct(body: bytes, url: str) -> str:
    return trafilatura.extract(body) or ""


def in_process(markdown: bool) -> Callable[[bytes, str], str]:
    def run(body: bytes, url: str) -> str:
        return html_text(clean_text(decode_text(body, None)), url=url, markdown=markdown).content

    return run


# name: (the extractor scored, the same work timed in one process)
EXTRACTORS: dict[str, tuple[Callable[[bytes, str], str], Callable[[bytes, str], str]]] = {
    "sift text": (sift("text"), in_process(markdown=False)),
    "sift markdown": (sift("markdown"), in_process(markdown=True)),
    "trafilatura": (trafilatura_direct, trafilatura_direct),
}


def scores(fn: Callable[[bytes, str], str], pages: list[Page]) -> list[Score]:
    return [score(fn(body, url), truth) for _, body, url, truth in pages]


def cpu_ms_per_page(fn: Callable[[bytes, str], str], pages: list[Page]) -> float:
    started = time.process_time()
    for _, body, url, _ in pages:
        fn(body, url)
    return (time.process_time() - started) * 1000 / len(pages)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def report(title: str, pages: list[Page], worst: int) -> dict[str, float]:
    print(f"\n{title}: {len(pages)} pages\n")
    print("| extractor     | word F1 | precision | recall | CPU ms/page, 1 process | CPU vs trafilatura |")
    print("|---------------|--------:|----------:|-------:|-----------------------:|-------------------:|")
    means: dict[str, float] = {}
    baseline = cpu_ms_per_page(trafilatura_direct, pages)
    for name, (fn, timed) in EXTRACTORS.items():
        page_scores = scores(fn, pages)
        per_page = baseline if timed is trafilatura_direct else cpu_ms_per_page(timed, pages)
        means[name] = mean([s.f1 for s in page_scores])
        print(
            f"| {name:<13} | {means[name]:>7.3f} | {mean([s.precision for s in page_scores]):>9.3f} "
            f"| {mean([s.recall for s in page_scores]):>6.3f} | {per_page:>22.1f} "
            f"| {per_page / baseline:>17.2f}x |"
        )
        if worst and name == "sift text":
            ranked = sorted(zip(page_scores, pages, strict=True), key=lambda pair: pair[0].f1)[:worst]
            for page_score, (page_name, *_) in ranked:
                print(f"|   worst: {page_name[:60]} P {page_score.precision:.2f} R {page_score.recall:.2f}")
    gap = means["sift text"] - means["trafilatura"]
    print(f"\nsift text minus trafilatura: {gap:+.3f} word F1")
    return means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data.add_argument(parser)
    parser.add_argument("--pages-only", action="store_true", help="score only the non-article pages")
    parser.add_argument("--worst", type=int, default=0, metavar="N", help="list sift text's N worst pages")
    args = parser.parse_args()
    pages = non_article_pages()
    articles = [] if args.pages_only else article_pages(data.articles(parser, args.data))
    sift("text")(pages[0][1], pages[0][2])  # warm the sandbox child, imports and caches
    in_process(markdown=False)(pages[0][1], pages[0][2])
    trafilatura_direct(pages[0][1], pages[0][2])
    if articles:
        report("article-extraction benchmark", articles, args.worst)
    report("non-article pages (bench/pages)", pages, args.worst)


if __name__ == "__main__":
    main()
