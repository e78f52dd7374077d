"""Benchmark sift's HTML path against trafilatura called directly, and score its text mode.

Reads the article-extraction benchmark from the bench-data directory (``--data``, by default
``../shared/bench-data`` beside the repository; gzipped HTML pages and ground-truth.json: {id:
{"articleBody": ..., "url": ...}}; never copied into the repository) and prints pages/s and mean
token F1 for:

- sift markdown: ``extract(..., mode="markdown")`` (type sniffing, decoding, trafilatura in a
  sandbox child, title/language/canonical metadata, whole-page fallback, cleaning);
- sift text: the same in ``text`` mode, scored against the ground truth;
- trafilatura: ``trafilatura.extract(html_bytes)`` with its defaults, as a baseline.

Token F1 is the bag-of-words F1 of lower-cased ``\\w+`` tokens, per page, then averaged.

    .venv/bin/python -m bench.extract [--data DIR] [--rounds N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")

import trafilatura

from batch.fetch.extract import extract
from batch.fetch.targets import TargetOptions
from bench import data

_TOKEN = re.compile(r"\w+")


def token_f1(predicted: str, truth: str) -> float:
    got, want = Counter(_TOKEN.findall(predicted.lower())), Counter(_TOKEN.findall(truth.lower()))
    common = sum((got & want).values())
    if not got or not want or not common:
        return float(not got and not want)
    precision, recall = common / sum(got.values()), common / sum(want.values())
    return 2 * precision * recall / (precision + recall)


def load(articles: Path) -> list[tuple[bytes, str, str]]:
    truth = json.loads((articles / "ground-truth.json").read_text())
    pages = []
    for key, item in sorted(truth.items()):
        path = articles / "html" / f"{key}.html.gz"
        if path.exists():
            pages.append((gzip.decompress(path.read_bytes()), item["url"], item["articleBody"]))
    return pages


def sift(mode: str) -> Callable[[bytes, str], str]:
    options = TargetOptions(mode=mode)

    def run(body: bytes, url: str) -> str:
        return extract(body, declared_type="text/html", charset=None, url=url, options=options).content

    return run


def trafilatura_direct(body: bytes, url: str) -> str:
    return trafilatura.extract(body) or ""


def measure(
    name: str, fn: Callable[[bytes, str], str], pages: list[tuple[bytes, str, str]], rounds: int
) -> str:
    outputs: list[str] = []
    started = time.perf_counter()
    for _ in range(rounds):
        outputs = [fn(body, url) for body, url, _ in pages]
    elapsed = time.perf_counter() - started
    f1 = sum(token_f1(out, truth) for out, (_, _, truth) in zip(outputs, pages, strict=True)) / len(pages)
    rate = len(pages) * rounds / elapsed
    return f"| {name:<28} | {rate:>8.1f} | {f1:>8.3f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data.add_argument(parser)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    pages = load(data.articles(parser, args.data))
    megabytes = sum(len(body) for body, _, _ in pages) / 1e6
    print(f"{len(pages)} pages, {megabytes:.1f} MB of HTML, {args.rounds} rounds each\n")
    print("| path                         |  pages/s | token F1 |")
    print("|------------------------------|---------:|---------:|")
    sift("text")(pages[0][0], pages[0][1])  # warm imports and caches
    print(measure("trafilatura.extract (txt)", trafilatura_direct, pages, args.rounds))
    print(measure("sift extract, text mode", sift("text"), pages, args.rounds))
    print(measure("sift extract, markdown mode", sift("markdown"), pages, args.rounds))


if __name__ == "__main__":
    main()
