"""Benchmark rendering: sift against bare Playwright on script-built pages, in one run.

Default: the twelve script-built pages of ``bench/render_pages.py`` served on 127.0.0.1, in
``--rounds`` interleaved rounds (each page by every row in turn, so the machine's load is shared).
Rows: **playwright** (the floor: the browser sift renders with, ``SIFT_RENDER_CHROMIUM`` or
``--chromium``, launched once by bare Playwright, a fresh context per page, ``page.content()``
right after ``load``, no routing), **sift** (the real
pipeline, ``fetch.pipeline.fetch`` with ``render: true``: gate, guarded download, render,
extraction, cache on a throwaway SQLite database); with ``--crawl4ai PYTHON``, **crawl4ai** (one
reused crawler with its shipped defaults, run by ``bench/crawl4ai_row.py`` under that interpreter,
a venv of its own). A page is right when its marker sentence is in the answer. Also printed:
sift's first render after start-up, one at the start of each round: on the Procfile's render
line (``manage.py run_render``) started afresh and listening, its browser not yet started, as a
deployment's first render finds it, against a warm render plus the browser's own start (bare
Playwright's driver and launch); and before it, a first render with no render process at all
(one started on demand, Python's start and Playwright's import included). The extraction is
warmed first by a plain fetch, as a web process that has served anything has it, and Node's
compile cache written by an earlier render process, as on a machine that rendered before.

``--articles``: the first ``--pages`` pages of the article-extraction set, with and without
render (pages/s, peak memory). ``--soak N``: N renders in a row (timeouts, crashes and heap hogs
among them) and the browser's process count and memory after the first and after the last.
``--subrequests``: the subrequests and bytes a render of each scripted page and of the first
``--pages`` article pages asked, and the render time by ``SIFT_RENDER_PER_HOST``
(``bench/render_subrequests.py``).

    .venv/bin/python -m bench.render [--chromium PATH] [--rounds 3] [--crawl4ai /tmp/c4ai/bin/python]
    .venv/bin/python -m bench.render [--chromium PATH] [--articles] [--soak 500]
    .venv/bin/python -m bench.render --subrequests [--pages 80]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import data, harness, render_pages, stats

CRAWL4AI_ROW = Path(__file__).with_name("crawl4ai_row.py")


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
        from django.conf import settings
        from playwright.sync_api import sync_playwright

        self.chromium = settings.SIFT_RENDER_CHROMIUM  # the browser sift renders with: a fair floor

        began = time.monotonic()
        self.playwright = sync_playwright().start()
        self.driver_seconds = time.monotonic() - began
        began = time.monotonic()
        self.browser = self.playwright.chromium.launch(executable_path=self.chromium, headless=True)
        return time.monotonic() - began

    def __call__(self, url: str, marker: str) -> tuple[float, bool]:
        return self.thread.submit(self._render, url, marker).result()

    def launch_again(self) -> float:
        """A second browser's launch, closed at once: the browser's own start under this round's load."""
        return self.thread.submit(self._launch_again).result()

    def _launch_again(self) -> float:
        began = time.monotonic()
        browser = self.playwright.chromium.launch(executable_path=self.chromium, headless=True)
        took = time.monotonic() - began
        browser.close()
        return took

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


class Crawl4AI:
    """Crawl4AI, in its own interpreter (``bench/crawl4ai_row.py``), one crawler for every page."""

    def __init__(self, python: str) -> None:
        from django.conf import settings

        chromium = settings.SIFT_RENDER_CHROMIUM
        self.process = subprocess.Popen(
            [python, str(CRAWL4AI_ROW)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "CRAWL4AI_NO_CLOUD_NOTICE": "1", "SIFT_RENDER_CHROMIUM": chromium},
        )
        self.start_seconds = float(self._answer()["ready"])

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        for line in self.process.stdout:  # anything Crawl4AI itself prints is passed over
            if line.startswith("{"):
                answer: dict[str, Any] = json.loads(line)
                return answer
        raise RuntimeError("bench/crawl4ai_row.py ended: is crawl4ai installed in that interpreter?")

    def __call__(self, url: str, marker: str) -> tuple[float, bool]:
        answer = self.crawl(url, marker)
        return float(answer["seconds"]), bool(answer["right"])

    def crawl(self, url: str, marker: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
        """Crawl4AI's answer for one page: ``seconds``, ``right`` (the marker in its HTML) and its
        ``markdown``; ``config``, more keyword arguments of its ``CrawlerRunConfig``."""
        assert self.process.stdin is not None
        job = {"url": url, "marker": marker, **({"config": config} if config else {})}
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def _plain(url: str) -> None:
    from fetch.pipeline import fetch
    from fetch.targets import Target, TargetOptions

    fetch(Target(url, TargetOptions()), partition="bench", caller="bench")


def _prime(url: str, marker: str) -> None:
    """A render process started and ended by itself, as on a machine that rendered before: Node
    writes the driver's compile cache (beside the render socket) when the driver exits cleanly."""
    from django.test import override_settings

    from fetch.render import server_process

    with override_settings(SIFT_RENDER_IDLE=1):
        _sift(url, marker)
    give_up = time.monotonic() + 30
    while server_process.running_pids() and time.monotonic() < give_up:
        time.sleep(0.1)


class RenderLine:
    """The Procfile's ``render`` line, started as ``make run`` starts it: Python and Playwright
    loaded, listening, its browser not started."""

    def __init__(self) -> None:
        from django.conf import settings

        from fetch.render import server_process

        env = {**os.environ, "SIFT_RENDER_SOCKET": settings.SIFT_RENDER_SOCKET}
        env["SIFT_RENDER_CHROMIUM"] = settings.SIFT_RENDER_CHROMIUM
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "run_render"],
            cwd=harness.REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        give_up = time.monotonic() + 60
        while server_process.listening_pid() != self.process.pid:
            if time.monotonic() > give_up or self.process.poll() is not None:
                raise RuntimeError("the render line did not start")
            time.sleep(0.05)
        time.sleep(0.5)  # as a deployment is: up for a while before its first render

    def stop(self) -> None:
        harness.stop(self.process, grace=20)


def scripted(rounds: int, crawl4ai: str | None = None, pause: float = 0.0) -> None:
    from fetch.render import server_process

    server_process.stop_server()  # a render process left by an earlier run would make the first render warm
    files, markers = render_pages.build()
    with render_pages.serving(files) as port:
        base = f"http://{render_pages.LOOPBACK}:{port}"
        floor = _Floor()
        rows: dict[str, Any] = {"playwright": floor, "sift": _sift}
        if crawl4ai:
            rows["crawl4ai"] = Crawl4AI(crawl4ai)
        _prime(f"{base}/static?prime", markers["/static"])
        _plain(f"{base}/static?plain")  # the extraction's first use is no render's cost
        firsts: list[float] = []
        cold_firsts: list[float] = []
        launches = [floor.launch_seconds]
        seconds: dict[str, list[float]] = {name: [] for name in rows}
        right: dict[str, int] = dict.fromkeys(rows, 0)
        per_page: dict[str, dict[str, list[float]]] = {path: {name: [] for name in rows} for path in markers}
        page_right: dict[str, dict[str, int]] = {path: dict.fromkeys(rows, 0) for path in markers}
        line: RenderLine | None = None
        try:
            for number in range(rounds):
                cold, first, line = _first_renders(f"{base}/static?first={number}", markers["/static"])
                cold_firsts.append(cold)
                firsts.append(first)
                launches.append(floor.launch_again())
                for path, marker in markers.items():
                    for name, row in rows.items():
                        took, ok = row(f"{base}{path}?round={number}", marker)
                        time.sleep(pause)  # what a row leaves running (a closing tab, a spare) ends first
                        seconds[name].append(took)
                        per_page[path][name].append(took)
                        right[name] += ok
                        page_right[path][name] += ok
                line.stop()
        finally:
            if line is not None:
                line.stop()
            for row in rows.values():
                if hasattr(row, "close"):
                    row.close()
            server_process.stop_server()
    total = rounds * len(markers)
    print(f"{len(markers)} script-built pages x {rounds} rounds, interleaved; load: {_load()}")
    print(f"browser (sift and the floor): {floor.chromium}")
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
    _report_first_renders(stats.median(seconds["sift"]), firsts, cold_firsts, floor, launches)
    if crawl4ai:
        print(f"crawl4ai's crawler start {rows['crawl4ai'].start_seconds * 1000:.0f} ms")


def _first_renders(url: str, marker: str) -> tuple[float, float, RenderLine]:
    """A round's first renders: with no render process (one is started on demand), then on a
    render line started afresh, which serves the rest of the round."""
    from fetch.render import server_process

    server_process.stop_server()
    cold = _sift(f"{url}&cold", marker)[0]
    server_process.stop_server()
    line = RenderLine()
    return cold, _sift(url, marker)[0], line


def _report_first_renders(
    warm: float, firsts: list[float], cold: list[float], floor: _Floor, launches: list[float]
) -> None:
    first, launch = stats.median(firsts), stats.median(launches)
    start = floor.driver_seconds + launch
    aim = 1.5 * warm + start
    print(
        f"sift's first render after start-up (the render line up, no browser yet), median of"
        f" {len(firsts)}: {first * 1000:.0f} ms ({', '.join(f'{one * 1000:.0f}' for one in firsts)});"
        f" warm median {warm * 1000:.0f} ms;"
        f" the browser's own start (bare Playwright) {start * 1000:.0f} ms (driver"
        f" {floor.driver_seconds * 1000:.0f} + launch {launch * 1000:.0f}, median of {len(launches)});"
        f" aim 1.5 x warm + start = {aim * 1000:.0f} ms: {'met' if first <= aim else 'missed'}"
    )
    print(
        f"sift's first render with no render process (one started on demand): median"
        f" {stats.median(cold) * 1000:.0f} ms ({', '.join(f'{one * 1000:.0f}' for one in cold)})"
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
    parser.add_argument("--subrequests", action="store_true", help="what pages ask of a render's bounds")
    parser.add_argument("--crawl4ai", metavar="PYTHON", help="a column for Crawl4AI, run by this interpreter")
    parser.add_argument("--chromium", metavar="PATH", help="SIFT_RENDER_CHROMIUM (default: its default)")
    parser.add_argument(
        "--pause",
        type=float,
        default=0.3,
        metavar="SECONDS",
        help="idle time after each render: no row's leftover work lands in the next (default: %(default)s)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = harness.service_env(
            f"sqlite:///{tmp}/bench.sqlite3",
            Path(tmp),
            SIFT_FETCH_ALLOW_CIDRS="127.0.0.1/32",
            SIFT_FETCH_ONLY_ALLOWED="true",
            SIFT_RENDER_TIMEOUT="10s",
            **({"SIFT_RENDER_CHROMIUM": args.chromium} if args.chromium else {}),
        )
        with harness.django_in_process(env):
            from django.core.management import call_command

            call_command("migrate", verbosity=0, interactive=False)
            if args.soak:
                from bench.render_soak import soak

                soak(args.soak)
            elif args.subrequests:
                from bench.render_soak import article_pages
                from bench.render_subrequests import run

                run(article_pages(parser, args.data, args.pages))
            elif args.articles:
                from bench.render_soak import article_pages, articles_run

                articles_run(article_pages(parser, args.data, args.pages))
            else:
                scripted(args.rounds, args.crawl4ai, args.pause)


if __name__ == "__main__":
    raise SystemExit(harness.run_until_interrupted(main))
