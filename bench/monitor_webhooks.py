"""Benchmark: how soon a page's change reaches its monitor's webhook receiver, through a real
cluster and the webhooks process on PostgreSQL, with the production fetch against pages on loopback.

    .venv/bin/python -m bench.monitor_webhooks [--monitors 40] [--callers 8] [--every 10]
                                               [--duration 120] [--workers 2]

One command does everything: it recreates the ``sift_bench_monitor_webhooks`` database, serves
``--monitors`` pages and a webhook receiver on loopback, makes a monitor of each page (``--callers``
callers, every ``--every`` s, the receiver as callback URL), starts ``qcluster`` and
``deliver_webhooks``, then for ``--duration`` s changes the pages at random moments, each page at
most once in two ``every`` (so that each change is a run's own). A change's latency is the arrival
of the webhook whose diff names it less the moment the page changed; the aim is one ``every`` plus
10 s. It prints the median, p90 and max: up to one ``every`` is the wait for the next run, the
rest (claim, fetch, store, the webhook's claim and POST) the engine's.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench import harness
from bench.postgres import BenchDatabase, server_settings
from bench.stats import median, percentile

DATABASE = BenchDatabase("sift_bench_monitor_webhooks")
# What a change's diff adds, naming the page and its version.
VERSION_LINE = re.compile(r"^\+Page (\d+) is at version (\d+)\.", re.MULTILINE)


class Pages(ThreadingHTTPServer):
    """``/p<n>``: page n at its current version."""

    daemon_threads = True

    def __init__(self, n_pages: int) -> None:
        super().__init__((harness.LOOPBACK, 0), _PageHandler)
        self.versions = [0] * n_pages

    def url(self, n: int) -> str:
        return f"http://{harness.LOOPBACK}:{self.server_address[1]}/p{n}"


class _PageHandler(BaseHTTPRequestHandler):
    server: Pages

    def do_GET(self) -> None:
        n = int(self.path.removeprefix("/p"))
        body = (
            f"<html><body><article><h1>Page {n}</h1><p>Page {n} is at version {self.server.versions[n]}."
            "</p><p>The rest of the page stays the same from one version to the next.</p>"
            "</article></body></html>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class Hooks(ThreadingHTTPServer):
    """Records when the webhook of each (page, version) arrived."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__((harness.LOOPBACK, 0), _HookHandler)
        self.arrived: dict[tuple[int, int], float] = {}
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://{harness.LOOPBACK}:{self.server_address[1]}/hooks"


class _HookHandler(BaseHTTPRequestHandler):
    server: Hooks

    def do_POST(self) -> None:
        at = time.time()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        diff = json.loads(body)["data"]["change"]["diff"]
        with self.server.lock:
            for page, version in VERSION_LINE.findall(diff):
                self.server.arrived.setdefault((int(page), int(version)), at)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def make_monitors(pages: Pages, hooks: Hooks, args: argparse.Namespace) -> None:
    from batch.models import ApiKey
    from batch.monitors import service
    from doors.validation import validate_targets

    callers = [ApiKey.issue(f"watcher-{n}")[0] for n in range(args.callers)]
    for n in range(args.monitors):
        target = validate_targets([pages.url(n)])[0]
        service.create(callers[n % args.callers], target, every=args.every, callback_url=hooks.url)


def change_pages(pages: Pages, args: argparse.Namespace) -> dict[tuple[int, int], float]:
    """Change each page at random moments over ``--duration``, at least two ``every`` apart, after
    its first reading; when each (page, version) came."""
    rng = random.Random(42)
    start, gap = time.monotonic() + args.every + 5, 2 * args.every
    moments = sorted(
        (start + offset, n)
        for n in range(args.monitors)
        for offset in _offsets(rng, gap, args.duration - args.every - 5)
    )
    changed: dict[tuple[int, int], float] = {}
    for at, n in moments:
        time.sleep(max(at - time.monotonic(), 0.0))
        pages.versions[n] += 1
        changed[(n, pages.versions[n])] = time.time()
    return changed


def _offsets(rng: random.Random, gap: float, span: float) -> list[float]:
    offsets, at = [], rng.uniform(0, gap)
    while at < span:
        offsets.append(at)
        at += gap + rng.uniform(0, gap)
    return offsets


def bench(args: argparse.Namespace) -> None:
    with DATABASE.fresh(), tempfile.TemporaryDirectory(prefix="sift-bench-hooks-") as tmp:
        workdir = Path(tmp)
        (workdir / "metrics").mkdir()
        env = harness.service_env(
            DATABASE.url,
            workdir / "metrics",
            SIFT_FETCH_ALLOW_CIDRS="127.0.0.0/8",
            SIFT_MONITOR_MIN_EVERY="1",
            SIFT_BATCH_WORKERS=str(args.workers),
            SIFT_MONITORS_PER_CALLER=str(-(-args.monitors // args.callers)),
        )
        pages, hooks = Pages(args.monitors), Hooks()
        for server in (pages, hooks):
            threading.Thread(target=server.serve_forever, daemon=True).start()
        with harness.django_in_process(env):
            harness.migrate_and_issue_caller("bench-monitor-webhooks")
            print(f"PostgreSQL: {server_settings()}")
            with (
                harness.qcluster(env, workdir / "cluster.log", args.workers),
                _webhooks(env, workdir / "webhooks.log"),
            ):
                make_monitors(pages, hooks, args)
                changed = change_pages(pages, args)
                _wait_for(hooks, changed, args.every + 30)
        for server in (pages, hooks):
            server.shutdown()
        print_latency(args, changed, hooks.arrived)


@contextmanager
def _webhooks(env: dict[str, str], log_path: Path) -> Iterator[None]:
    """``manage.py deliver_webhooks``, the Procfile's webhooks line, stopped on the way out."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "deliver_webhooks"],
            cwd=harness.REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches us only; we stop it in order
        )
    try:
        yield
    finally:
        harness.stop(process)


def _wait_for(hooks: Hooks, changed: dict[tuple[int, int], float], most: float) -> None:
    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        with hooks.lock:
            if all(key in hooks.arrived for key in changed):
                return
        time.sleep(0.5)


def print_latency(
    args: argparse.Namespace, changed: dict[tuple[int, int], float], arrived: dict[tuple[int, int], float]
) -> None:
    spans = [arrived[key] - at for key, at in changed.items() if key in arrived]
    print(
        f"\n{args.monitors} monitors of {args.callers} callers every {args.every}s, "
        f"{len(changed)} changes in {args.duration:g}s; webhooks arrived: {len(spans)}"
    )
    if spans:
        print(
            f"  change -> webhook s: median {median(spans):.2f}  p90 {percentile(spans, 90):.2f}  "
            f"max {max(spans):.2f}, one every + {max(spans) - args.every:.2f} (aim: + 10)"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--monitors", type=int, default=40)
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--every", type=int, default=10, help="seconds between a monitor's runs")
    parser.add_argument("--duration", type=float, default=120, help="seconds of page changes")
    parser.add_argument("--workers", type=int, choices=(1, 2), default=2)
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    return harness.run_until_interrupted(lambda: bench(args))


if __name__ == "__main__":
    sys.exit(main())
