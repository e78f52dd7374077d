"""Are a page's facts right, not merely read? Page facts (``fetch.html.facts``) on WCXB's labelled
pages, per page type, against readings that do not share their code.

For each page of the WCXB sets named (``--sets``, default wcxb-dev and wcxb-train, under
``--data``), parsed as the sandbox child parses it:

- ``published``: the date sift's metadata gives against htmldate's reading of the same page
  (``find_date(original_date=True)``, its extensive search, the page's URL), on pages with and
  without a JSON-LD block: the share of pages each dates, and among the pages both date, the
  share where they name the same day;
- ``title``: whether ``metadata.title`` names the page's visible headline (its first ``<h1>``),
  the same words after case, punctuation and spacing, or one holding the other; beside it the
  envelope's ``title`` (og:title, else ``<title>``, else ``<h1>``), on the pages with a headline;
- product pages: the share with a ``product.price``, and of those, the share whose price is
  written in the page's labelled main content (WCXB's ``articleBody``) in one of its usual forms,
  and in the page's visible text (its body's text outside scripts and styles);
- product pages with a JSON-LD ``description``: the share whose description's words are mostly
  in the labelled main content, and the share whose words are mostly in sift's content (which
  never takes them from the JSON-LD), to say what a product page's content holds.

    .venv/bin/python -m bench.facts [--data DIR] [--sets wcxb-dev wcxb-train]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import htmldate
import trafilatura

from bench import data
from fetch.html.facts.declared import declared_facts
from fetch.html.facts.elements import gather
from fetch.html.facts.jsonld import json_ld_items
from fetch.html.main_content import html_text

_WORD = re.compile(r"\w+")
_VISIBLE_TEXT = (
    "//body//text()[not(ancestor::script or ancestor::style or ancestor::noscript or ancestor::template)]"
)
# The share of a description's words that must be in a text for the text to hold it.
HOLDS = 0.6


@dataclass
class Tally:
    """Counts for one page type (or all of them)."""

    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, **flags: bool) -> None:
        for name, value in flags.items():
            self.counts[name] += int(value)


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def same_title(title: str | None, headline: str) -> bool:
    if not title:
        return False
    ours, theirs = " ".join(words(title)), " ".join(words(headline))
    return bool(theirs) and (ours == theirs or theirs in ours or (len(ours) > 10 and ours in theirs))


def price_forms(price: float) -> set[str]:
    """How a page may write ``price``: 19.9 as 19.90, 19,90, 19.9; 1299 as 1,299, 1.299, 1299."""
    whole = int(price)
    cents = round((price - whole) * 100)
    grouped = f"{whole:,}"
    forms = {str(whole) if cents == 0 else f"{price:.2f}", grouped, grouped.replace(",", ".")}
    if cents:
        forms |= {f"{whole}.{cents:02d}", f"{whole},{cents:02d}", f"{grouped}.{cents:02d}", f"{price:g}"}
        forms |= {f"{grouped.replace(',', '.')},{cents:02d}"}
    else:
        forms |= {f"{whole}.00", f"{whole},00", f"{grouped}.00"}
    return forms


def holds(text: str, description: str) -> bool:
    wanted = set(words(description))
    return bool(wanted) and len(wanted & set(words(text))) >= HOLDS * len(wanted)


def measure(folder: Path, tallies: dict[str, Tally]) -> None:
    truth = json.loads((folder / "ground-truth.json").read_text())
    for key, item in sorted(truth.items()):
        raw = gzip.decompress((folder / "html" / f"{key}.html.gz").read_bytes())
        tree = trafilatura.load_html(raw)
        if tree is None:
            continue
        kind, url, body = item["page_type"], item["url"], item["articleBody"]
        json_ld, _ = json_ld_items(gather(tree).script)
        facts = declared_facts(tree, url, structured=True)
        meta = facts["metadata"]
        theirs = htmldate.find_date(tree, url=url, original_date=True)
        ours = (meta.get("published") or "")[:10] or None
        group = "with JSON-LD" if json_ld else "without JSON-LD"
        headline = " ".join(str(tree.xpath("string(//h1[1])")).split())
        envelope_title = html_text(raw.decode("utf-8", "replace"), url=url, markdown=True).title
        for name in (kind, "all"):
            tallies[name].add(pages=True)
            tallies[name].add(
                **{
                    f"{group}: pages": True,
                    f"{group}: ours dated": ours is not None,
                    f"{group}: htmldate dated": theirs is not None,
                    f"{group}: both dated": ours is not None and theirs is not None,
                    f"{group}: same day": ours is not None and ours == theirs,
                    "headline": bool(headline),
                    "metadata.title names it": bool(headline) and same_title(meta.get("title"), headline),
                    "envelope title names it": bool(headline) and same_title(envelope_title, headline),
                }
            )
        if kind == "product":
            visible = " ".join(tree.xpath(_VISIBLE_TEXT))
            _product(tallies["product"], facts, json_ld, raw, url=url, body=body, visible=visible)


def _product(
    tally: Tally,
    facts: dict[str, Any],
    json_ld: list[dict[str, Any]],
    raw: bytes,
    *,
    url: str,
    body: str,
    visible: str,
) -> None:
    product = facts.get("product") or {}
    price = product.get("price")
    tally.add(**{"product facts": bool(product), "price": price is not None})
    if price is not None:
        forms = price_forms(float(price))
        tally.add(
            **{
                "price in main content": any(form in body for form in forms),
                "price in visible text": any(form in visible for form in forms),
            }
        )
    described = next(
        (
            item["description"]
            for item in json_ld
            if isinstance(item.get("description"), str) and len(words(item["description"])) >= 8
        ),
        None,
    )
    if described is None:
        return
    content = html_text(raw.decode("utf-8", "replace"), url=url, markdown=False).content
    tally.add(
        **{
            "JSON-LD description": True,
            "description in main content": holds(body, described),
            "description in sift content": holds(content, described),
        }
    )


def share(counts: dict[str, int], part: str, whole: str) -> str:
    total = counts.get(whole, 0)
    return f"{counts.get(part, 0) / total:.2f} ({counts.get(part, 0)}/{total})" if total else "-"


def report(tallies: dict[str, Tally]) -> None:
    for kind in sorted(tallies, key=lambda name: (name == "all", name)):
        counts = tallies[kind].counts
        print(f"\n{kind}: {counts['pages']} pages")
        for group in ("with JSON-LD", "without JSON-LD"):
            if counts.get(f"{group}: pages"):
                print(
                    f"  published, {group} ({counts[f'{group}: pages']}): sift dates "
                    f"{share(counts, f'{group}: ours dated', f'{group}: pages')}, htmldate "
                    f"{share(counts, f'{group}: htmldate dated', f'{group}: pages')}; "
                    "same day where both date "
                    f"{share(counts, f'{group}: same day', f'{group}: both dated')}"
                )
        print(
            "  title names the visible headline: metadata "
            f"{share(counts, 'metadata.title names it', 'headline')}, "
            f"envelope {share(counts, 'envelope title names it', 'headline')}"
        )
        if counts.get("price") is not None and kind == "product":
            print(
                f"  product facts {share(counts, 'product facts', 'pages')}, "
                f"price {share(counts, 'price', 'pages')}, "
                f"price in labelled main content {share(counts, 'price in main content', 'price')}, "
                f"in the page's visible text {share(counts, 'price in visible text', 'price')}"
            )
            print(
                f"  JSON-LD description ({counts.get('JSON-LD description', 0)} pages): "
                "in labelled main content "
                f"{share(counts, 'description in main content', 'JSON-LD description')}, in sift's content "
                f"{share(counts, 'description in sift content', 'JSON-LD description')}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    data.add_argument(parser)
    parser.add_argument("--sets", nargs="+", default=["wcxb-dev", "wcxb-train"], help="WCXB sets to read")
    options = parser.parse_args()
    for name in options.sets:
        tallies: dict[str, Tally] = defaultdict(Tally)
        measure(data.required(parser, options.data, name), tallies)
        print(f"=== {name}")
        report(tallies)


if __name__ == "__main__":
    main()
