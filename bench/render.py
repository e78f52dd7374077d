"""Benchmark rendering: sift against bare Playwright on script-built pages, in one run.

Default: the twelve script-built pages of ``bench/render_pages.py`` served on 127.0.0.1, in
``--rounds`` interleaved rounds (each page by every row in turn, so the machine's load is shared).
Rows: **playwright** (the floor: the same Chromium launched once by bare Playwright, a fresh
context per page, ``page.content()`` right after ``load``, no routing), **sift** (the real
pipeline, ``fetch.pipeline.fetch`` with ``render: true``: gate, guarded download, render,
extraction, cache on a throwaway SQLite database). A page is right when its marker sentence
is in the answer. Also printed: sift's first render after start-up (browser start included).

``--articles``: the first ``--pages`` pages of the article-extraction set, with and without
render (pages/s, peak memory). ``--soak N``: N renders in a row (timeouts, crashes and heap hogs
among them) and the browser's process count and memory after the first and after the last.

    .venv/bin/python -m bench.render [--rounds 3] [--articles] [--soak 500]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import data, harness, render_pages, stats

CHROMIUM = "/usr/bin/chromium"


def _sift(url: str, marker: str) -> tuple[float, bool]:
    from fetch.errors import FetchError
    from fetch.pipeline import fetch
    from fetch.targets import Target, TargetOptions

    began = time.monotonic()
    try:
        content = fetch(Target(url, TargetOptions(render=True)), partition="bench", caller="bench")["content"]
    except FetchError as exc:
        content = f"failed: {exc.outcome}"
    return time.monotonic() - began, marker in content


class _Floor:
    """Bare Playwright: one browser, a fresh context per page, the DOM right after ``load``.

    Its own thread: Playwright's sync API runs an event loop, where Django refuses to run.
    """

    def __init__(self) -> None:
        self.thread = ThreadPoolExecutor(max_workers=1)
        self.launch_seconds = self.thread.submit(self._start).result()

    def _start(self) -> float:
        from playwright.sync_api import sync_playwright

        self.playwright = sync_playwright().start()
        began = time.monotonic()
        self.browser = self.playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        return time.monotonic() - began

    def __call__(self, url: str, marker: str) -> tuple[float, bool]:
        return self.thread.submit(self._render, url, marker).result()

    def _render(self, url: str, marker: str) -> tuple[float, bool]:
        began = time.monotonic()
        context = self.browser.new_context()
        page = context.new_page()
        page.goto(url, wait_until="load")
        html = page.content()
        context.close()
        return time.monotonic() - began, marker in html

    def close(self) -> None:
        self.thread.submit(self._stop).result()
        self.thread.shutdown()

    def _stop(self) -> None:
        self.browser.close()
        self.playwright.stop()


def scripted(rounds: int) -> None:
    files, markers = render_pages.build()
    with render_pages.serving(files) as port:
        base = f"http://{render_pages.LOOPBACK}:{port}"
        floor = _Floor()
        rows: dict[str, Any] = {"playwright": floor, "sift": _sift}
        first, _ = _sift(f"{base}/static?first", markers["/static"])
        seconds: dict[str, list[float]] = {name: [] for name in rows}
        right: dict[str, int] = dict.fromkeys(rows, 0)
        per_page: dict[str, dict[str, list[float]]] = {path: {name: [] for name in rows} for path in markers}
        page_right: dict[str, dict[str, int]] = {path: dict.fromkeys(rows, 0) for path in markers}
        try:
            for number in range(rounds):
                for path, marker in markers.items():
                    for name, row in rows.items():
                        took, ok = row(f"{base}{path}?round={number}", marker)
                        seconds[name].append(took)
                        per_page[path][name].append(took)
                        right[name] += ok
                        page_right[path][name] += ok
        finally:
            for row in rows.values():
                if hasattr(row, "close"):
                    row.close()
    total = rounds * len(markers)
    print(f"{len(markers)} script-built pages x {rounds} rounds, interleaved; load: {_load()}")
    print("page (median, right)" + "".join(f"{name:>16}" for name in rows))
    for path, timings in per_page.items():
        cells = (
            f"{stats.median(t) * 1000:8.0f}ms {page_right[path][n]}/{rounds}" for n, t in timings.items()
        )
        print(f"{path:<19}" + "".join(f"{cell:>16}" for cell in cells))
    floor_median = stats.median(seconds["playwright"])
    for name in rows:
        median = stats.median(seconds[name])
        print(
            f"{name:<11} median {median * 1000:5.0f} ms ({median / floor_median:4.2f}x the floor)"
            f"  p95 {stats.percentile(seconds[name], 95) * 1000:5.0f} ms  right {right[name]}/{total}"
        )
    warm = stats.median(seconds["sift"])
    print(
        f"sift's first render after start-up {first * 1000:.0f} ms; warm median {warm * 1000:.0f} ms;"
        f" the browser's own start (bare Playwright) {floor.launch_seconds * 1000:.0f} ms"
    )


def _load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data.add_argument(parser)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default: %(default)s)")
    parser.add_argument("--articles", action="store_true", help="the article set, with and without render")
    parser.add_argument("--pages", type=int, default=20, help="article pages (default: %(default)s)")
    parser.add_argument("--soak", type=int, default=0, metavar="N", help="N renders in a row, leak check")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = harness.service_env(
            f"sqlite:///{tmp}/bench.sqlite3",
            Path(tmp),
            SIFT_FETCH_ALLOW_CIDRS="127.0.0.1/32",
            SIFT_FETCH_ONLY_ALLOWED="true",
            SIFT_RENDER_TIMEOUT="10s",
        )
        with harness.django_in_process(env):
            from django.core.management import call_command

            call_command("migrate", verbosity=0, interactive=False)
            if args.soak:
                from bench.render_soak import soak

                soak(args.soak)
            elif args.articles:
                from bench.render_soak import article_pages, articles_run

                articles_run(article_pages(parser, args.data, args.pages))
            else:
                scripted(args.rounds)


if __name__ == "__main__":
    raise SystemExit(harness.run_until_interrupted(main))
