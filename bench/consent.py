"""Benchmark rendering as a person sees the page: the consent page set (``bench/consent_pages.py``).

Each page rendered through the pipeline (``fetch.pipeline.fetch``, ``render: true``, text mode,
the page's ``actions`` where it needs them), in ``--rounds`` rounds, by two rows: **sift** (the
default, ``consent: "reject"``) and **leave** (``consent: "leave"``, no actions: the page as a
render read it before). With ``--crawl4ai PYTHON``, a third: **crawl4ai** (``bench/crawl4ai_row.py``
under that interpreter, on the same Chromium, one crawler reused) with
``remove_overlay_elements``, ``magic`` and ``scan_full_page``, and the page's actions as its
``js_code`` (a click as the element's ``click()``, a scroll as scrolls to the bottom with a pause
after each); its ``remove_consent_popups`` clicks accept, so it is left off, and its markdown is
what is scored. Rows alternate page by page, in an order turned each round. A page is right when
the answer's word-F1 against the article is at least 0.9 and it holds none of the text that
covered the article. Printed: each page's F1, what ``consent_handled`` said and its median time,
the pages right per row, and which platforms were held out of the work.

    .venv/bin/python -m bench.consent [--rounds 3] [--crawl4ai /tmp/c4ai/bin/python]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import consent_pages, harness, render_pages, stats
from bench.render import Crawl4AI

RIGHT_F1 = 0.9
Run = tuple[float, float, bool, "str | None"]  # seconds, F1, right, consent_handled
Row = Callable[[str, dict[str, Any]], tuple[float, str, "str | None"]]


def _render(url: str, options: dict[str, Any]) -> tuple[float, str, str | None]:
    from fetch.errors import FetchError
    from fetch.pipeline import fetch
    from fetch.targets import Target, parse_options

    target_options = parse_options({"render": True, "mode": "text", **options})
    began = time.monotonic()
    try:
        answer = fetch(Target(url, target_options), partition="bench", caller="bench")
    except FetchError as exc:
        return time.monotonic() - began, f"failed: {exc.outcome}", None
    return time.monotonic() - began, answer["content"], answer.get("consent_handled")


def _right(content: str) -> tuple[float, bool]:
    from bench.quality import score  # it loads the extraction, which needs Django set up

    f1 = score(content, consent_pages.ARTICLE_TEXT).f1
    covered = any(text in content for text in consent_pages.FORBIDDEN)
    return f1, f1 >= RIGHT_F1 and not covered


# What Crawl4AI is asked on every page: its answers to what covers a page, and a scroll through it.
CRAWL4AI_CONFIG = {"remove_overlay_elements": True, "magic": True, "scan_full_page": True}
SCROLL_PAUSE_MS = 300


def crawl4ai_js(actions: list[dict[str, Any]]) -> list[str]:
    """A page's ``actions`` as Crawl4AI's ``js_code``: a click as the element's ``click()``, a
    scroll as ``times`` scrolls to the bottom, each followed by a pause for what it loads."""
    code = []
    for step in actions:
        if step["type"] == "click":
            code.append(f"document.querySelector({json.dumps(step['selector'])}).click();")
        elif step["type"] == "scroll":
            code.append(
                f"for (let i = 0; i < {int(step.get('times', 1))}; i++) {{"
                " window.scrollTo(0, document.body.scrollHeight);"
                f" await new Promise((r) => setTimeout(r, {SCROLL_PAUSE_MS})); }}"
            )
        else:
            raise ValueError(f"no js_code for a {step['type']!r} step")
    return code


def _crawl4ai_row(crawler: Crawl4AI) -> Row:
    def row(url: str, extra: dict[str, Any]) -> tuple[float, str, str | None]:
        config: dict[str, Any] = dict(CRAWL4AI_CONFIG)
        if extra.get("actions"):
            config["js_code"] = crawl4ai_js(extra["actions"])
        answer = crawler.crawl(url, consent_pages.TITLE, config)
        return float(answer["seconds"]), str(answer["markdown"]), None

    return row


def run(rounds: int, crawl4ai: str | None = None) -> None:
    from fetch.render import server_process

    server_process.stop_server()
    rows: dict[str, Row] = {
        "sift": _render,
        "leave": lambda url, extra: _render(url, {"consent": "leave"}),
    }
    crawler = Crawl4AI(crawl4ai) if crawl4ai else None
    if crawler is not None:
        rows["crawl4ai"] = _crawl4ai_row(crawler)
    results: dict[str, dict[str, list[Run]]] = {
        row: {name: [] for name in consent_pages.PAGES} for row in rows
    }
    with render_pages.serving(consent_pages.files()) as port:
        base = f"http://{render_pages.LOOPBACK}:{port}"
        _render(f"{base}/read_more?warm", {})  # the browser's start is no page's cost
        if crawler is not None:
            rows["crawl4ai"](f"{base}/read_more?warm", {})
        try:
            for number in range(rounds):
                names = list(rows)
                order = names[number % len(names) :] + names[: number % len(names)]  # each row first once
                for name, (_, extra) in consent_pages.PAGES.items():
                    for row in order:
                        took, content, handled = rows[row](f"{base}/{name}?round={number}&row={row}", extra)
                        f1, right = _right(content)
                        results[row][name].append((took, f1, right, handled))
                        time.sleep(0.2)
        finally:
            if crawler is not None:
                crawler.close()
            server_process.stop_server()
    _report(results, rounds)


def _report(results: dict[str, dict[str, list[Run]]], rounds: int) -> None:
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"{len(consent_pages.PAGES)} pages x {rounds} rounds; load {' '.join(load)}")
    print(
        f"{'page':<18}{'handled':>10}" + "".join(f"{row + ' F1':>14}{'ms':>7}{'right':>7}" for row in results)
    )
    for name in consent_pages.PAGES:
        cells = [f"{results['sift'][name][-1][3] or '-':>10}"]  # only sift answers consent
        for by_page in results.values():
            runs = by_page[name]
            f1 = stats.median(r[1] for r in runs)
            ms = stats.median(r[0] for r in runs) * 1000
            cells.append(f"{f1:14.3f}{ms:7.0f}{sum(r[2] for r in runs):>5}/{rounds}")
        print(f"{name:<18}" + "".join(cells))
    for row, by_page in results.items():
        runs = [r for page in by_page.values() for r in page]
        median_ms = stats.median(r[0] for r in runs) * 1000
        print(f"{row:<9} right {sum(r[2] for r in runs)}/{len(runs)}, median {median_ms:.0f} ms")
    print(f"tuned on: {', '.join(consent_pages.TUNED)}; held out: {', '.join(consent_pages.HELD_OUT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default: %(default)s)")
    parser.add_argument("--crawl4ai", metavar="PYTHON", help="a row for Crawl4AI, run by this interpreter")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = harness.service_env(
            f"sqlite:///{tmp}/bench.sqlite3",
            Path(tmp),
            SIFT_FETCH_ALLOW_CIDRS="127.0.0.1/32",
            SIFT_FETCH_ONLY_ALLOWED="true",
            SIFT_RENDER_TIMEOUT="15s",
            SIFT_CACHE_TTL="0s",
        )
        with harness.django_in_process(env):
            from django.core.management import call_command

            call_command("migrate", verbosity=0, interactive=False)
            run(args.rounds, args.crawl4ai)


if __name__ == "__main__":
    raise SystemExit(harness.run_until_interrupted(main))
