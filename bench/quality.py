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
  hash of the page id: rules are tuned and the page-type model trained on ``tune`` (with
  ``wcxb-train``), and ``check`` is the test set, never tuned or trained on (docs/benchmarks.md).

``learning``: the pages the page-type model learns from (the tune half and ``wcxb-train``, whose
pages share no site with wcxb-dev), read as the service reads them; with ``--cv`` they are split
in folds by site (the page's host), each fold read with a page-type model trained on the others
(``bench/train.py``), so that no page is read by a model that saw its site: the cross-validated
figures. While no reading consults the model (the service reads a page by the kind it declares,
``fetch.html.declared_kind``), they equal the plain reading's. ``--save FILE``
keeps each page's scores; ``--against FILE`` compares with such a file (another branch's, say):
per set and page type the mean change of sift's F1 with its 95% interval by a paired bootstrap
over that type's pages; an interval wholly below zero is a real drop, not noise.

Both extractors run in this one process, one page after the other: sift in text mode through
``fetch.extract.extract`` (in the sandbox child, as the service runs it), and trafilatura called
directly with its defaults. ``--cpu`` adds the CPU milliseconds per page of each in one process
(sift's ``read_page`` on the decoded page, what the child runs, and trafilatura on the bytes).
bench/extract.py measures the service's rates.

    .venv/bin/python -m bench.quality [--data DIR] [--sets articles,pages,wcxb]
        [--half tune|check] [--worst N] [--cpu] [--cv] [--save FILE] [--against FILE]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")

import trafilatura

from bench import data
from bench.extract import sift
from fetch.documents.sniff import clean_text, decode_text
from fetch.html.reader import read_page

PAGES = Path(__file__).resolve().parent / "pages"
SETS = ("articles", "pages", "wcxb", "learning")
LEARNING = "learning pages (tune half, wcxb-train)"
HALVES = ("tune", "check")
_TOKEN = re.compile(r"\w+")
BOOTSTRAP_ROUNDS = 2000

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


def report(
    title: str, pages: list[LabelledPage], worst: int, sift_scores: list[Score] | None = None
) -> dict[str, tuple[float, float]]:
    """One table: per page type (and per half, or part), sift text beside trafilatura; each
    page's two F1s by its name."""
    sift_scores = sift_scores or scores(sift("text"), pages)
    direct_scores = scores(trafilatura_direct, pages)
    halves = sorted({page.half for page in pages})
    groups = {"": pages} if not pages[0].half else {h: [p for p in pages if p.half == h] for h in halves}
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
    pairs = zip(pages, sift_scores, direct_scores, strict=True)
    return {page.name: (mine.f1, theirs.f1) for page, mine, theirs in pairs}


def report_cross_validated(
    pages: list[LabelledPage], folds: int, worst: int
) -> dict[str, tuple[float, float]]:
    """sift's F1 on each page read with a page-type model trained on the other folds' sites."""
    # scikit-learn and the model's own modules: imported for --cv alone.
    from bench import train
    from fetch.html.forest import from_dict
    from fetch.html.page_type import use_model

    learnt = train.labelled_pages(pages)
    by_name = {page.name: page for page in learnt}
    found: dict[str, Score] = {}
    for learn, judge in train.folds(learnt, folds):
        use_model(from_dict(train.exported(train.fitted(learn))))
        for page in judge:
            source = next(p for p in pages if p.name == page.name)
            found[page.name] = score(sift_in_process(source.body, source.url), source.truth)
    use_model(None)
    kept = [page for page in pages if page.name in by_name]
    title = f"{LEARNING}, cross-validated by site ({folds} folds)"
    return report(title, kept, worst, [found[page.name] for page in kept])


def compare(saved: dict[str, dict[str, list[float]]], now: dict[str, dict[str, tuple[float, float]]],
            sets: dict[str, list[LabelledPage]]) -> None:  # fmt: skip
    """Per set and page type, the mean change of sift's F1 against ``saved`` with its 95% interval
    by a paired bootstrap over the pages of that type (``BOOTSTRAP_ROUNDS`` resamplings)."""
    rng = random.Random(0)
    print("\nsift's F1 against the saved run: mean change [95% interval], * a real drop")
    for title, pages in sets.items():
        before, after = saved.get(title, {}), now.get(title, {})
        kinds = sorted({page.page_type for page in pages})
        for kind in [*kinds, "all"]:
            changes = [
                after[page.name][0] - before[page.name][0]
                for page in pages
                if (kind in ("all", page.page_type)) and page.name in before and page.name in after
            ]
            if not changes:
                continue
            means = sorted(mean([rng.choice(changes) for _ in changes]) for _ in range(BOOTSTRAP_ROUNDS))
            low, high = means[int(0.025 * BOOTSTRAP_ROUNDS)], means[int(0.975 * BOOTSTRAP_ROUNDS) - 1]
            flag = " *" if high < 0 else ""
            interval = f"[{low:+.3f}, {high:+.3f}]"
            print(f"  {title:<32} {kind:<14} {mean(changes):+.3f} {interval} {len(changes):>4}{flag}")


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
    if "learning" in chosen:
        dev = benchmark_pages(data.required(parser, args.data, data.WCXB), halves=True)
        train = benchmark_pages(data.required(parser, args.data, "wcxb-train"))
        found[LEARNING] = [page for page in dev if page.half == "tune"]
        found[LEARNING] += [replace(page, half="train") for page in train]
    if "wcxb" in chosen:
        wcxb = benchmark_pages(data.required(parser, args.data, data.WCXB), halves=True)
        found["wcxb-dev"] = [page for page in wcxb if args.half in ("", page.half)]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data.add_argument(parser)
    parser.add_argument(
        "--sets", default="articles,pages,wcxb", help=f"which sets to score ({','.join(SETS)})"
    )
    parser.add_argument("--half", choices=HALVES, default="", help="only this half of wcxb-dev")
    parser.add_argument(
        "--worst", type=int, default=0, metavar="N", help="list the N pages sift loses most on"
    )
    parser.add_argument("--cpu", action="store_true", help="also time both extractors in one process")
    parser.add_argument("--cv", action="store_true", help="read the learning pages cross-validated by site")
    parser.add_argument("--folds", type=int, default=5, help="folds of --cv")
    parser.add_argument("--save", type=Path, metavar="FILE", help="write each page's scores here")
    parser.add_argument("--against", type=Path, metavar="FILE", help="compare with a --save file")
    args = parser.parse_args()
    sets = labelled_sets(parser, args)
    warm = non_article_pages()[0]
    sift("text")(warm.body, warm.url)  # start the sandbox child, warm imports and caches
    trafilatura_direct(warm.body, warm.url)
    found = {}
    for title, pages in sets.items():
        if title == LEARNING and args.cv:
            found[title] = report_cross_validated(pages, args.folds, args.worst)
        else:
            found[title] = report(title, pages, args.worst)
    if args.save:
        args.save.write_text(json.dumps(found, indent=0, sort_keys=True), encoding="utf-8")
    if args.against:
        compare(json.loads(args.against.read_text(encoding="utf-8")), found, sets)
    if args.cpu:
        print()
        for title, pages in sets.items():
            report_cpu(title, pages)


if __name__ == "__main__":
    main()
