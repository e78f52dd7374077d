"""Do open event streams slow other requests? ``/healthz`` and ``GET /v1/batch`` latency from the
Procfile's web process with no stream open, with ``--streams`` (100) open, and with none again.

    SIFT_FETCH_ONLY_ALLOWED=true .venv/bin/python -m bench.streams [--streams N] [--requests N] [--postgres]

Each stream follows a job that stays open (cancelled with a target in flight, as its rows say), so
every stream waits for the whole run and the web process's job watch polls all of them. Results go
in docs/benchmarks.md ("Event streams").
"""

from __future__ import annotations

import argparse
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path

from bench.harness import (
    REPO,
    django_in_process,
    migrate_and_issue_caller,
    run_until_interrupted,
    service_env,
    stop,
)
from bench.stats import percentile

PER_CALLER = 8  # the default share: streams are spread so that none is refused


def web_command(port: int) -> list[str]:
    """The Procfile's web line, as a deployment runs it."""
    line = next(line for line in (REPO / "Procfile").read_text().splitlines() if line.startswith("web:"))
    return ["sh", "-c", "exec " + line.partition(":")[2].strip().replace("${PORT:-8000}", str(port))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def web_process(env: dict[str, str], port: int, log: Path) -> Iterator[None]:
    bin_dir = str(Path(sys.executable).parent)
    with open(log, "ab") as out:
        process = subprocess.Popen(
            web_command(port),
            cwd=REPO,
            env={**env, "PATH": f"{bin_dir}:{env.get('PATH', '')}"},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        yield
    finally:
        stop(process)


def waiting_jobs(count: int) -> list[tuple[str, str]]:
    """(key, job id) pairs: one caller per ``PER_CALLER`` streams, each with a job that stays open."""
    from django.utils import timezone

    from batch.models import ApiKey, BatchJob, BatchTarget

    migrate_and_issue_caller("bench-streams-probe")
    pairs = []
    now = timezone.now()
    for n in range((count + PER_CALLER - 1) // PER_CALLER):
        caller, key = ApiKey.issue(f"bench-streams-{n}")
        job = BatchJob.objects.create(
            caller=caller,
            caller_class=caller.caller_class,
            status="cancelled",
            targets_total=1,
            created_at=now,
            last_read_at=now,
            finished_at=now,
            content_key=f"bench-{n}",
        )
        BatchTarget.objects.create(
            job=job, idx=0, url="https://example.org/", status="running", lease_until=now + timedelta(hours=1)
        )
        pairs.append((key, job.id))
    return pairs


def open_streams(port: int, pairs: list[tuple[str, str]], count: int) -> list[socket.socket]:
    sockets = []
    for n in range(count):
        key, job_id = pairs[n // PER_CALLER]
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        head_lines = [
            f"GET /v1/batch/{job_id}/events HTTP/1.1",
            "Host: 127.0.0.1",
            f"Authorization: Bearer {key}",
        ]
        sock.sendall(("\r\n".join(head_lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(4096)
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"stream {n} refused: {head[:200]!r}")
        sockets.append(sock)
    return sockets


def latencies(port: int, path: str, key: str, requests: int) -> list[float]:
    seconds = []
    for _ in range(requests):
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {key}"}
        )
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
        seconds.append(time.perf_counter() - started)
    return seconds


def row(label: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"| {label} | {percentile(ms, 50):.1f} | {percentile(ms, 95):.1f} | {max(ms):.1f} |"


def measure(port: int, key: str, requests: int, label: str) -> list[str]:
    return [
        row(f"{label}: /healthz", latencies(port, "/healthz", key, requests)),
        row(f"{label}: GET /v1/batch", latencies(port, "/v1/batch", key, requests)),
    ]


def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="sift-bench-streams-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        (work / "metrics").mkdir()
        if args.postgres:
            from bench.postgres import BenchDatabase

            database_url = stack.enter_context(BenchDatabase("sift_events_bench").fresh()).url
        else:
            database_url = f"sqlite:///{work / 'db.sqlite3'}"
        env = service_env(database_url, work / "metrics", SIFT_FETCH_ONLY_ALLOWED="true")
        stack.enter_context(django_in_process(env))
        pairs = waiting_jobs(args.streams)
        port = free_port()
        stack.enter_context(web_process(env, port, work / "web.log"))
        key = pairs[0][0]
        latencies(port, "/healthz", key, 20)  # warm up both workers
        rows = measure(port, key, args.requests, "no stream")
        sockets = open_streams(port, pairs, args.streams)
        time.sleep(2)
        rows += measure(port, key, args.requests, f"{args.streams} streams open")
        for sock in sockets:
            sock.close()
        time.sleep(2)
        rows += measure(port, key, args.requests, "no stream again")
        print(f"{args.requests} sequential requests each; database {database_url.split(':')[0]}")
        print("| | p50 ms | p95 ms | max ms |\n|---|---|---|---|")
        print("\n".join(rows))
        print(f"load: {shlex.quote(Path('/proc/loadavg').read_text().strip())}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--postgres", action="store_true", help="a fresh database on 127.0.0.1:5432")
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    return run_until_interrupted(lambda: bench(args))


if __name__ == "__main__":
    sys.exit(main())
