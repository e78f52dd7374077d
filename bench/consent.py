"""Benchmark rendering as a person sees the page: the consent page set (``bench/consent_pages.py``).

Each page rendered through the pipeline (``fetch.pipeline.fetch``, ``render: true``, text mode,
the page's ``actions`` where it needs them), in ``--rounds`` rounds, by two rows: **sift** (the
default, ``consent: "reject"``) and **leave** (``consent: "leave"``, no actions: the page as a
render read it before). A page is right when the answer's word-F1 against the article is at
least 0.9 and it holds none of the text that covered the article. Printed: each page's F1, what
``consent_handled`` said and its median time, the pages right per row, and which platforms were
held out of the work.

    .venv/bin/python -m bench.consent [--rounds 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import consent_pages, harness, render_pages, stats
from bench.quality import score

RIGHT_F1 = 0.9


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
    f1 = score(content, consent_pages.ARTICLE_TEXT).f1
    covered = any(text in content for text in consent_pages.FORBIDDEN)
    return f1, f1 >= RIGHT_F1 and not covered


def run(rounds: int) -> None:
    from fetch.render import server_process

    server_process.stop_server()
    rows = {"sift": lambda extra: extra, "leave": lambda extra: {"consent": "leave"}}
    results: dict[str, dict[str, list[tuple[float, float, bool, str | None]]]] = {
        row: {name: [] for name in consent_pages.PAGES} for row in rows
    }
    with render_pages.serving(consent_pages.files()) as port:
        base = f"http://{render_pages.LOOPBACK}:{port}"
        _render(f"{base}/read_more?warm", {})  # the browser's start is no page's cost
        try:
            for number in range(rounds):
                for name, (_, extra) in consent_pages.PAGES.items():
                    for row, options in rows.items():
                        took, content, handled = _render(
                            f"{base}/{name}?round={number}&row={row}", options(extra)
                        )
                        f1, right = _right(content)
                        results[row][name].append((took, f1, right, handled))
                        time.sleep(0.2)
        finally:
            server_process.stop_server()
    _report(results, rounds)


def _report(results: dict[str, dict[str, list[tuple[float, float, bool, str | None]]]], rounds: int) -> None:
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"{len(consent_pages.PAGES)} pages x {rounds} rounds; load {' '.join(load)}")
    columns = f"{'sift F1':>9}{'handled':>10}{'ms':>7}{'right':>7}"
    print(f"{'page':<18}{columns}   {'leave F1':>9}{'ms':>7}{'right':>7}")
    for name in consent_pages.PAGES:
        cells = []
        for by_page in results.values():
            runs = by_page[name]
            f1 = stats.median(r[1] for r in runs)
            ms = stats.median(r[0] for r in runs) * 1000
            right = sum(r[2] for r in runs)
            handled = runs[-1][3] or "-"
            cells.append((f1, handled, ms, right))
        (f1, handled, ms, right), (lf1, _, lms, lright) = cells
        sift = f"{f1:9.3f}{handled:>10}{ms:7.0f}{right:>5}/{rounds}"
        print(f"{name:<18}{sift}   {lf1:9.3f}{lms:7.0f}{lright:>5}/{rounds}")
    for row, by_page in results.items():
        runs = [r for page in by_page.values() for r in page]
        median_ms = stats.median(r[0] for r in runs) * 1000
        print(f"{row:<6} right {sum(r[2] for r in runs)}/{len(runs)}, median {median_ms:.0f} ms")
    print(f"tuned on: {', '.join(consent_pages.TUNED)}; held out: {', '.join(consent_pages.HELD_OUT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default: %(default)s)")
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
            run(args.rounds)


if __name__ == "__main__":
    raise SystemExit(harness.run_until_interrupted(main))
