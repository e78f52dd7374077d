"""Benchmark rendering against a plain fetch: pages/s and peak memory, in one run.

Serves the first 20 pages of the article-extraction set (``--data``, by default
``../shared/bench-data`` beside the repository) on 127.0.0.1 and fetches each through the real
pipeline (``fetch.pipeline.fetch``: gate, guarded client, cache on a throwaway SQLite
database, extraction), once without render and once with ``render: true``. Only 127.0.0.1 is
allowed and every other address refused, so the pages' outside scripts, styles and frames are
refused by the guard, as a render on a closed network would have them.

Peak memory: this process's high-water mark (VmHWM, the fetch side), and the most the render
child with its Playwright driver and Chromium held at once (proportional set size, sampled).

    .venv/bin/python -m bench.render [--data DIR] [--pages N]
"""

from __future__ import annotations

import argparse
import gzip
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench import data, harness, stats


class _Pages(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pages: dict[str, bytes]) -> None:
        super().__init__((harness.LOOPBACK, 0), _PageHandler)
        self.pages = pages


class _PageHandler(BaseHTTPRequestHandler):
    server: _Pages

    def do_GET(self) -> None:
        body = self.server.pages.get(self.path.lstrip("/"))
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(pages: dict[str, bytes]) -> Iterator[int]:
    server = _Pages(pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


class BrowserPeak:
    """Samples the memory of the running render children's trees; keeps the most seen."""

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
        from fetch import render

        while not self._stop.wait(0.1):
            for pid in list(render.running):
                self.peak = max(self.peak, render._tree_rss(pid))


def own_peak_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def run(pages: dict[str, bytes], port: int) -> None:
    from fetch.errors import FetchError
    from fetch.pipeline import fetch
    from fetch.targets import Target, TargetOptions

    for render in (False, True):
        seconds: list[float] = []
        failures: dict[str, int] = {}
        chars = 0
        started = time.monotonic()
        with BrowserPeak() as browser:
            for name in pages:
                target = Target(f"http://{harness.LOOPBACK}:{port}/{name}", TargetOptions(render=render))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data.add_argument(parser)
    parser.add_argument("--pages", type=int, default=20, help="how many pages (default: %(default)s)")
    args = parser.parse_args()
    articles = data.articles(parser, args.data)
    files = sorted((articles / "html").glob("*.html.gz"))[: args.pages]
    pages = {
        f"{path.name.removesuffix('.html.gz')}.html": gzip.decompress(path.read_bytes()) for path in files
    }
    with tempfile.TemporaryDirectory() as tmp:
        env = harness.service_env(
            f"sqlite:///{tmp}/bench.sqlite3",
            Path(tmp),
            SIFT_FETCH_ALLOW_CIDRS="127.0.0.1/32",
            SIFT_FETCH_ONLY_ALLOWED="true",
        )
        with harness.django_in_process(env), serving(pages) as port:
            from django.core.management import call_command

            call_command("migrate", verbosity=0, interactive=False)
            print(f"{len(pages)} pages from {articles.name}, served on {harness.LOOPBACK}:{port}")
            run(pages, port)


if __name__ == "__main__":
    raise SystemExit(harness.run_until_interrupted(main))
