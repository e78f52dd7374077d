"""Word-F1 of sift's HTML extraction per page type, beside trafilatura's, on three labelled sets.

Each page is scored by the token F1 of ``bench.extract`` (bag of lower-cased ``\\w+`` tokens),
then averaged per page type:

- the article-extraction benchmark (one type, article), from the bench-data directory
  (``--data``; see ``bench/data.py``);
- ``bench/pages/``: forum threads, Q&A pages, documentation, product pages, listings and other
  pages written for sift, with the real-world boilerplate around them; ``truth.json`` holds each
  page's main text (the title left to the envelope); a page's type is its name's first word;
- ``wcxb-dev`` (bench-data): real pages of seven types (article, collection, documentation,
  forum, listing, product, service), at most one a site. It is split in two fixed halves by a
  hash of the page id: rules are tuned on ``tune`` and checked on ``check`` (docs/benchmarks.md).

Both extractors run in this one process, one page after the other: sift in text mode through
``fetch.extract.extract`` (in the sandbox child, as the service runs it), and trafilatura called
directly with its defaults. ``--cpu`` adds the CPU milliseconds per page of each in one process
(sift's ``read_page`` on the decoded page, what the child runs, and trafilatura on the bytes).
bench/extract.py measures the service's rates.

    .venv/bin/python -m bench.quality [--data DIR] [--sets articles,pages,wcxb]
        [--half tune|check] [--worst N] [--cpu]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")

import trafilatura

from bench import data
from bench.extract import sift
from fetch.documents.sniff import clean_text, decode_text
from fetch.html.reader import read_page

PAGES = Path(__file__).resolve().parent / "pages"
SETS = ("articles", "pages", "wcxb")
HALVES = ("tune", "check")
_TOKEN = re.compile(r"\w+")

Extractor = Callable[[bytes, str], str]


@dataclass(frozen=True)
class LabelledPage:
    name: str
    page_type: str
    body: bytes
    url: str
    truth: str
    half: str = ""  # wcxb-dev's "tune" or "check"


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


def half_of(page_id: str) -> str:
    """The fixed half of wcxb-dev a page belongs to: the first byte of its id's SHA-256, even or odd."""
    return HALVES[hashlib.sha256(page_id.encode()).digest()[0] % 2]


def non_article_pages(folder: Path = PAGES) -> list[LabelledPage]:
    """The labelled pages of ``bench/pages``: ``<name>.html`` beside ``truth.json`` ({name: text})."""
    truth: dict[str, str] = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
    return [
        LabelledPage(
            name,
            name.split("-")[0],
            (folder / f"{name}.html").read_bytes(),
            f"https://pages.example/{name}",
            text,
        )
        for name, text in sorted(truth.items())
    ]


def benchmark_pages(folder: Path, *, halves: bool = False) -> list[LabelledPage]:
    """The pages of a bench-data set: html/<id>.html.gz and ground-truth.json ({id: {"articleBody",
    "url", "page_type"?}}); a page without a type is an article. ``halves`` marks each page's half."""
    truth: dict[str, dict[str, str]] = json.loads((folder / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for key, item in sorted(truth.items()):
        path = folder / "html" / f"{key}.html.gz"
        if path.exists():
            body = gzip.decompress(path.read_bytes())
            page_type = item.get("page_type", "article")
            half = half_of(key) if halves else ""
            pages.append(LabelledPage(key, page_type, body, item["url"], item["articleBody"], half))
    return pages


def trafilatura_direct(body: bytes, url: str) -> str:
    return trafilatura.extract(body) or ""


def sift_in_process(body: bytes, url: str) -> str:
    """What the sandbox child runs on a page (``read_page``: hidden text, spans, then ``main_content``)."""
    page = read_page(
        clean_text(decode_text(body, None)),
        url=url,
        markdown_mode=False,
        images=False,
        hidden_text="drop",
        rendered=False,
    ).page
    return page.content


def scores(fn: Extractor, pages: list[LabelledPage]) -> list[Score]:
    return [score(fn(page.body, page.url), page.truth) for page in pages]


def cpu_ms_per_page(fn: Extractor, pages: list[LabelledPage]) -> float:
    started = time.process_time()
    for page in pages:
        fn(page.body, page.url)
    return (time.process_time() - started) * 1000 / len(pages)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def by_type(pages: list[LabelledPage], values: list[float]) -> dict[str, list[float]]:
    """The values of each page type, and of all pages under "all"."""
    grouped: dict[str, list[float]] = defaultdict(list)
    for page, value in zip(pages, values, strict=True):
        grouped[page.page_type].append(value)
        grouped["all"].append(value)
    return grouped


def report(title: str, pages: list[LabelledPage], worst: int) -> None:
    """One table: per page type (and per half on wcxb-dev), sift text beside trafilatura."""
    sift_scores = scores(sift("text"), pages)
    direct_scores = scores(trafilatura_direct, pages)
    groups = {"": pages} if not pages[0].half else {h: [p for p in pages if p.half == h] for h in HALVES}
    if len(groups) > 1:
        groups["all"] = pages
    columns: dict[str, tuple[dict[str, list[float]], dict[str, list[float]]]] = {}
    for name, members in groups.items():
        if not members:
            continue
        chosen = [n for n, page in enumerate(pages) if page in members]
        columns[name] = (
            by_type(members, [sift_scores[n].f1 for n in chosen]),
            by_type(members, [direct_scores[n].f1 for n in chosen]),
        )
    print(f"\n{title}: {len(pages)} pages; word F1, sift text / trafilatura (sift minus trafilatura)\n")
    heads = [f"{name or 'pages'} (n)" for name in columns]
    print("| page type     | " + " | ".join(f"{head:<28}" for head in heads) + " |")
    print("|---------------|" + "|".join("-" * 30 for _ in heads) + "|")
    types = [*sorted({page.page_type for page in pages}), "all"]
    for page_type in types:
        cells = []
        for sifts, directs in columns.values():
            if page_type not in sifts:
                cells.append(f"{'':<28}")
                continue
            one, other = mean(sifts[page_type]), mean(directs[page_type])
            cells.append(f"{one:.3f} / {other:.3f} ({one - other:+.3f}) {len(sifts[page_type]):>3}")
        label = f"**{page_type}**" if page_type == "all" else page_type
        print(f"| {label:<13} | " + " | ".join(cells) + " |")
    if worst:
        ranked = sorted(zip(sift_scores, direct_scores, pages, strict=True), key=lambda s: s[0].f1 - s[1].f1)
        for mine, theirs, page in ranked[:worst]:
            print(
                f"  worst: {page.name} {page.page_type} F1 {mine.f1:.2f} vs {theirs.f1:.2f} "
                f"(P {mine.precision:.2f} R {mine.recall:.2f})"
            )


def report_cpu(title: str, pages: list[LabelledPage]) -> None:
    theirs, mine = cpu_ms_per_page(trafilatura_direct, pages), cpu_ms_per_page(sift_in_process, pages)
    print(
        f"{title}: CPU ms/page in one process, sift {mine:.1f}, trafilatura {theirs:.1f}"
        f" ({mine / theirs:.2f}x)"
    )


def labelled_sets(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, list[LabelledPage]]:
    chosen = {name.strip() for name in args.sets.split(",")}
    if not chosen <= set(SETS):
        parser.error(f"--sets takes some of {', '.join(SETS)}")
    found: dict[str, list[LabelledPage]] = {}
    if "articles" in chosen:
        found["article-extraction benchmark"] = benchmark_pages(data.articles(parser, args.data))
    if "pages" in chosen:
        found["bench/pages"] = non_article_pages()
    if "wcxb" in chosen:
        wcxb = benchmark_pages(data.required(parser, args.data, data.WCXB), halves=True)
        found["wcxb-dev"] = [page for page in wcxb if args.half in ("", page.half)]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data.add_argument(parser)
    parser.add_argument("--sets", default=",".join(SETS), help=f"which sets to score ({','.join(SETS)})")
    parser.add_argument("--half", choices=HALVES, default="", help="only this half of wcxb-dev")
    parser.add_argument(
        "--worst", type=int, default=0, metavar="N", help="list the N pages sift loses most on"
    )
    parser.add_argument("--cpu", action="store_true", help="also time both extractors in one process")
    args = parser.parse_args()
    sets = labelled_sets(parser, args)
    warm = non_article_pages()[0]
    sift("text")(warm.body, warm.url)  # start the sandbox child, warm imports and caches
    trafilatura_direct(warm.body, warm.url)
    for title, pages in sets.items():
        report(title, pages, args.worst)
    if args.cpu:
        print()
        for title, pages in sets.items():
            report_cpu(title, pages)


if __name__ == "__main__":
    main()
