"""Benchmark sift's HTML path against trafilatura called directly, and score its text mode.

Reads a set of the bench-data directory (``--data``, by default ``../shared/bench-data`` beside
the repository; ``--set``: the article-extraction benchmark, or ``wcxb-dev``; gzipped HTML pages
and ground-truth.json: {id: {"articleBody": ..., "url": ...}}; never copied into the repository)
and prints pages/s, CPU a page and mean token F1 for:

- trafilatura: ``trafilatura.extract(html_bytes)`` with its defaults, in this one process: the
  baseline;
- sift text and sift markdown in this process: ``extract(..., mode=...)`` (type sniffing,
  decoding, trafilatura in a sandbox child, title/language/canonical metadata, whole-page
  fallback, cleaning);
- sift text and sift markdown through the service: ``GET /v1/fetch`` on the real web process
  (the Procfile's ``web`` line, gunicorn on a throwaway PostgreSQL database), which fetches each
  page from a local upstream (loopback, the gzipped page sent as ``Content-Encoding: gzip``),
  with ``--clients`` clients (4) at once, every request a cache miss (each round asks for
  distinct URLs). The service may use both cores (its workers, their sandbox children); the
  upstream and the clients run in this process and share the machine with it.

``--baseline DIR`` runs another checkout's web process (e.g. the main branch) beside this one's,
on the same upstream and database, its rounds alternating with the others. ``--no-in-process``
leaves out sift's in-process rows, ``--no-service`` the HTTP rows.

Rates and CPU are the medians over the rounds, and each ratio line the median of a round's rate
over trafilatura's in the same round. Token F1 is the bag-of-words F1 of lower-cased ``\\w+``
tokens, per page, then averaged.

    .venv/bin/python -m bench.extract [--data DIR] [--set articles|wcxb-dev] [--rounds N]
        [--clients N] [--baseline DIR] [--no-in-process] [--no-service]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import http.client
import json
import os
import queue
import re
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")

import django
import trafilatura

from bench import cpu, data, harness, submit
from bench.harness import LOOPBACK, REPO
from bench.postgres import BenchDatabase
from bench.stats import median
from fetch.options import Mode
from fetch.targets import TargetOptions

_TOKEN = re.compile(r"\w+")


def token_f1(predicted: str, truth: str) -> float:
    got, want = Counter(_TOKEN.findall(predicted.lower())), Counter(_TOKEN.findall(truth.lower()))
    common = sum((got & want).values())
    if not got or not want or not common:
        return float(not got and not want)
    precision, recall = common / sum(got.values()), common / sum(want.values())
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class Page:
    key: str
    body: bytes
    url: str
    truth: str


@dataclass(frozen=True)
class Row:
    name: str
    rate: float
    f1: float


SETS = {"articles": data.ARTICLES, "wcxb-dev": data.WCXB}


def load(folder: Path) -> list[Page]:
    truth = json.loads((folder / "ground-truth.json").read_text())
    pages = []
    for key, item in sorted(truth.items()):
        path = folder / "html" / f"{key}.html.gz"
        if path.exists():
            pages.append(Page(key, gzip.decompress(path.read_bytes()), item["url"], item["articleBody"]))
    return pages


def score(outputs: list[str], pages: list[Page]) -> float:
    return sum(token_f1(out, page.truth) for out, page in zip(outputs, pages, strict=True)) / len(pages)


def sift(mode: Mode) -> Callable[[bytes, str], str]:
    django.setup()  # fetch.extract reaches the models (the sandbox's metrics)
    from fetch.extract import extract

    options = TargetOptions(mode=mode)

    def run(body: bytes, url: str) -> str:
        return extract(body, declared_type="text/html", charset=None, url=url, options=options).content

    return run


def trafilatura_direct(body: bytes, url: str) -> str:
    return trafilatura.extract(body) or ""


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU seconds used so far by ``roots`` and every process under them, ended ones included
    (a process's ended and reaped children are counted in its ``cutime`` and ``cstime``)."""
    table = cpu.processes()
    pids = {*roots, *(pid for root in roots for pid in cpu.descendants(root, table))}
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
        except OSError:
            continue  # it ended since the listing
        total += sum(int(x) for x in fields[11:15]) / cpu.CLOCK_TICKS  # utime stime cutime cstime
    return total


@dataclass
class Contender:
    """One way of turning the pages into text, timed round by round."""

    name: str
    run: Callable[[int], list[str]]  # round number -> the text of every page
    roots: Callable[[], list[int]]  # whose CPU is this path's
    rates: list[float] = field(default_factory=list)  # pages/s, a round each
    cpu_ms: list[float] = field(default_factory=list)  # CPU ms a page, a round each
    outputs: list[str] = field(default_factory=list)

    def round(self, number: int) -> None:
        roots = self.roots()
        cpu_before, started = tree_cpu_seconds(roots), time.perf_counter()
        self.outputs = self.run(number)
        elapsed = time.perf_counter() - started
        self.rates.append(len(self.outputs) / elapsed)
        self.cpu_ms.append(1000 * (tree_cpu_seconds(roots) - cpu_before) / len(self.outputs))


def in_process(name: str, fn: Callable[[bytes, str], str], pages: list[Page]) -> Contender:
    return Contender(name, lambda _: [fn(page.body, page.url) for page in pages], lambda: [os.getpid()])


# --- through the service ---------------------------------------------------------------------

DATABASE = BenchDatabase("sift_bench_extract")


class _UpstreamServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pages: dict[str, bytes]) -> None:
        super().__init__((LOOPBACK, 0), _UpstreamHandler)
        self.pages = pages


class _UpstreamHandler(BaseHTTPRequestHandler):
    """``GET /<round>/<page id>``: that page, gzipped as stored, whatever the round."""

    server: _UpstreamServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = self.server.pages.get(self.path.rsplit("/", 1)[-1])
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def upstream(articles: Path, keys: list[str]) -> Iterator[int]:
    """Serve the benchmark's gzipped pages on loopback, many at once; yield the port."""
    server = _UpstreamServer({key: (articles / "html" / f"{key}.html.gz").read_bytes() for key in keys})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class Service:
    port: int
    upstream: int
    keys: list[str]  # one per client: a caller has SIFT_FETCH_PER_CALLER fetches in flight per process
    gunicorn: int

    def pids(self) -> list[int]:
        """gunicorn (its workers and their sandbox children under it) and its database sessions."""
        return [self.gunicorn, *DATABASE.backend_pids()]


def fetch_text(conn: http.client.HTTPConnection, service: Service, key: str, url: str, mode: str) -> str:
    query = urllib.parse.urlencode({"url": url, "mode": mode})
    conn.request("GET", f"/v1/fetch?{query}", headers={"Authorization": f"Bearer {key}"})
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        raise RuntimeError(f"GET /v1/fetch {url} answered {response.status}: {body[:500]!r}")
    content: str = json.loads(body)["content"]
    return content


def through_service(
    service: Service, mode: str, ids: list[str], round_name: str, clients: int
) -> dict[str, str]:
    """Every page of ``ids`` fetched once, under ``/<round_name>/``, by ``clients`` clients at once."""
    work: queue.SimpleQueue[str] = queue.SimpleQueue()
    for key in ids:
        work.put(key)
    outputs: dict[str, str] = {}
    failures: list[BaseException] = []

    def client(index: int) -> None:
        conn = http.client.HTTPConnection(LOOPBACK, service.port, timeout=120)
        try:
            while not failures:
                try:
                    key = work.get_nowait()
                except queue.Empty:
                    return
                url = f"http://{LOOPBACK}:{service.upstream}/{round_name}/{key}"
                outputs[key] = fetch_text(conn, service, service.keys[index], url, mode)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return outputs


def via_service(service: Service, mode: str, pages: list[Page], clients: int, checkout: str) -> Contender:
    ids = [page.key for page in pages]

    def run(number: int) -> list[str]:
        # A new path every round: each request is a cache miss, fetched and extracted afresh.
        outputs = through_service(service, mode, ids, f"{checkout}-{mode}-{number}", clients)
        return [outputs[key] for key in ids]

    label = "" if checkout == "this" else f" ({checkout})"
    return Contender(f"GET /v1/fetch {mode}, {clients} clients{label}", run, service.pids)


@contextmanager
def services_running(
    folder: Path, pages: list[Page], clients: int, checkouts: dict[str, Path]
) -> Iterator[dict[str, Service]]:
    """Upstream, database and the Procfile's web process of each checkout, all torn down on the
    way out."""
    with (
        upstream(folder, [page.key for page in pages]) as upstream_port,
        DATABASE.fresh(),
        tempfile.TemporaryDirectory(prefix="sift-bench-extract-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        submit.manage(["migrate", "--verbosity", "0"], DATABASE.url)
        keys = submit.issue_keys(clients, DATABASE.url)
        running = {}
        for name, checkout in checkouts.items():
            env = harness.service_env(
                DATABASE.url,
                Path(tmp) / f"metrics-{name}",
                PATH=f"{submit.BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                SIFT_FETCH_ALLOW_CIDRS="127.0.0.0/8",
                SIFT_FETCH_ONLY_ALLOWED="true",
                SIFT_FETCH_ALLOW_PORTS=str(upstream_port),
            )
            server = stack.enter_context(submit.gunicorn(env, Path(tmp), f"extract-{name}", checkout))
            service = Service(server.port, upstream_port, keys, server.process.pid)
            # One page per client first, as a deployment that has served a request or two.
            through_service(service, "text", [p.key for p in pages[:clients]], f"warm-{name}", clients)
            running[name] = service
        yield running


# --- report ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data.add_argument(parser)
    parser.add_argument("--set", choices=sorted(SETS), default="articles", help="the pages (articles)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients of the service (4)")
    parser.add_argument("--baseline", type=Path, metavar="DIR", help="another checkout's service beside")
    parser.add_argument("--no-in-process", action="store_true", help="no in-process rows of sift")
    parser.add_argument("--no-service", action="store_true", help="in-process rows only, no HTTP")
    args = parser.parse_args()
    folder = data.required(parser, args.data, SETS[args.set])
    pages = load(folder)
    megabytes = sum(len(page.body) for page in pages) / 1e6
    print(f"{len(pages)} pages, {megabytes:.1f} MB of HTML, {args.rounds} rounds each", flush=True)
    sift("text")(pages[0].body, pages[0].url)  # warm imports and caches
    baseline = in_process("trafilatura.extract (txt)", trafilatura_direct, pages)
    paths = [baseline]
    if not args.no_in_process:
        paths += [
            in_process("sift extract, text mode", sift("text"), pages),
            in_process("sift extract, markdown mode", sift("markdown"), pages),
        ]
    checkouts = {"this": REPO} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    with contextlib.ExitStack() as stack:
        if not args.no_service:
            running = stack.enter_context(services_running(folder, pages, args.clients, checkouts))
            paths += [
                via_service(service, mode, pages, args.clients, name)
                for mode in ("text", "markdown")
                for name, service in running.items()
            ]
        # Round by round, every path in turn: a machine whose load changes over the run weighs
        # on all of them alike.
        for number in range(args.rounds):
            for path in paths:
                path.round(number)
    print_report(paths, baseline, pages)


def print_report(paths: list[Contender], baseline: Contender, pages: list[Page]) -> None:
    print(f"\n| {'path':<46} |  pages/s | CPU ms/page | token F1 |")
    print(f"|{'-' * 48}|---------:|------------:|---------:|")
    for path in paths:
        rate, cpu_ms = median(path.rates), median(path.cpu_ms)
        f1 = score(path.outputs, pages)
        print(f"| {path.name:<46} | {rate:>8.1f} | {cpu_ms:>11.1f} | {f1:>8.3f} |")
    print(
        "\nCPU: of this process and its sandbox children in-process (the clients' and upstream's "
        "too while the service runs are not counted), of gunicorn, its workers, their children "
        "and the database sessions through the service.\n"
    )
    for path in paths[1:]:
        ratios = [rate / base for rate, base in zip(path.rates, baseline.rates, strict=True)]
        each = ", ".join(f"{ratio:.2f}" for ratio in ratios)
        print(f"ratio {path.name} / trafilatura: {median(ratios):.2f}x (rounds: {each})")


if __name__ == "__main__":
    raise SystemExit(harness.run_until_interrupted(main))
