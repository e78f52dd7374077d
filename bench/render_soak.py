"""The article and soak parts of ``bench/render.py`` (its docstring says how to run them)."""

from __future__ import annotations

import argparse
import gzip
import threading
import time
from pathlib import Path

from bench import data, harness, render_pages, stats


class BrowserPeak:
    """Samples the memory of the render process's tree; keeps the most seen."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> BrowserPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        from fetch.render import server_process
        from fetch.sandbox import proctree

        while not self._stop.wait(0.1):
            for pid in server_process.running_pids():
                self.peak = max(self.peak, proctree.tree_pss(pid))


def own_peak_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def article_pages(parser: argparse.ArgumentParser, data_dir: Path, count: int) -> dict[str, bytes]:
    articles = data.articles(parser, data_dir)
    files = sorted((articles / "html").glob("*.html.gz"))[:count]
    return {
        f"/{path.name.removesuffix('.html.gz')}.html": gzip.decompress(path.read_bytes()) for path in files
    }


def articles_run(pages: dict[str, bytes]) -> None:
    from fetch.errors import FetchError
    from fetch.pipeline import fetch
    from fetch.targets import Target, TargetOptions

    files = {path: ("text/html; charset=utf-8", body) for path, body in pages.items()}
    with render_pages.serving(files) as port:
        print(f"{len(pages)} article pages served on {harness.LOOPBACK}:{port}")
        for render in (False, True):
            seconds: list[float] = []
            failures: dict[str, int] = {}
            chars = 0
            started = time.monotonic()
            with BrowserPeak() as browser:
                for name in pages:
                    target = Target(f"http://{harness.LOOPBACK}:{port}{name}", TargetOptions(render=render))
                    began = time.monotonic()
                    try:
                        chars += len(fetch(target, partition="bench", caller="bench")["content"])
                    except FetchError as exc:
                        failures[exc.outcome] = failures.get(exc.outcome, 0) + 1
                    seconds.append(time.monotonic() - began)
            took = time.monotonic() - started
            label = "render: true " if render else "render: false"
            print(
                f"{label}  {len(pages) / took:6.2f} pages/s  median {stats.median(seconds):5.2f}s"
                f"  p95 {stats.percentile(seconds, 95):5.2f}s  chars {chars:>8}"
                f"  failures {failures or 'none'}"
                f"  peak RSS (this process) {own_peak_bytes() / 2**20:5.0f} MiB"
                + (f"  peak PSS (browser tree) {browser.peak / 2**20:5.0f} MiB" if render else "")
            )


SPIN = b"<html><body><p>spin</p><script>while (true) {}</script></body></html>"
HOG = (
    b"<html><body><script>const a = [];"
    b" while (true) { a.push(new Array(1e6).fill(Math.random())); }</script></body></html>"
)


def _processes() -> tuple[int, int, int]:
    """The render process's tree (processes, PSS) and the Chromium processes left to init."""
    from fetch.render import server_process
    from fetch.sandbox import proctree

    pids = server_process.running_pids()
    tree = set().union(*(proctree.tree_pids(pid) for pid in pids)) if pids else set()
    orphans = 0
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        if "chrom" in name and rest.split()[1] == "1":
            orphans += 1
    return len(tree), sum(proctree.tree_pss(pid) for pid in pids), orphans


def soak(count: int) -> None:
    """``count`` renders in a row on a render line (as ``make run`` runs it); every 25th a
    timeout, a crash (the browser killed) or a heap hog."""
    from bench.render import RenderLine

    line = RenderLine()
    try:
        _soak(count)
    finally:
        line.stop()


def _soak(count: int) -> None:
    import os
    import signal

    from fetch.errors import FetchError
    from fetch.pipeline import fetch
    from fetch.render import server_process
    from fetch.sandbox import proctree
    from fetch.targets import Target, TargetOptions

    files, markers = render_pages.build()
    files["/spin"] = ("text/html", SPIN)
    files["/hog"] = ("text/html", HOG)
    outcomes: dict[str, int] = {}
    print(f"load before: {Path('/proc/loadavg').read_text().split()[:3]}")
    with render_pages.serving(files) as port:
        pages = list(markers)
        started = time.monotonic()
        first: tuple[int, int, int] | None = None
        for number in range(count):
            special = number % 25 == 24 and number < count - 1
            path = ("/spin", "crash", "/hog")[number // 25 % 3] if special else pages[number % len(pages)]
            if path == "crash":
                for pid in server_process.running_pids():
                    for member in proctree.tree_pids(pid):
                        try:  # a tab's process may end between the listing and here
                            if "chromium" in Path(f"/proc/{member}/comm").read_text():
                                os.kill(member, signal.SIGKILL)
                        except (FileNotFoundError, ProcessLookupError):
                            continue
                path = pages[0]
            url = f"http://{harness.LOOPBACK}:{port}{path}?soak={number}"
            target = Target(url, TargetOptions(render=True))
            try:
                fetch(target, partition="soak", caller="soak")
                outcome = "ok"
            except FetchError as exc:
                outcome = exc.outcome
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if outcome != "ok":
                print(f"  render {number} of {path}: {outcome}")
            if first is None:
                time.sleep(0.5)  # the spare tab made after it
                first = _processes()
        time.sleep(0.5)
        last = _processes()
    assert first is not None
    print(f"{count} renders in {time.monotonic() - started:.0f}s: {outcomes}")
    for label, (processes, pss, orphans) in (("after the first", first), ("after the last", last)):
        print(
            f"{label:<16} render tree {processes:3d} processes {pss / 2**20:6.0f} MiB PSS;"
            f" Chromium processes left to init: {orphans}"
        )
    server_process.stop_server()
