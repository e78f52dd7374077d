"""Do the ASGI web line, and open event streams, slow ordinary requests?

    SIFT_FETCH_ONLY_ALLOWED=true .venv/bin/python -m bench.streams [--streams 100] [--requests 40]
                                                                  [--rounds 4] [--postgres]

Three kinds of ordinary request, each timed from sending it to the answer's last byte, on a new
connection: ``GET /healthz``; ``GET /v1/batch/{id}``, a finished job of 32 targets of 3,000
characters each; ``POST /v1/batch``, a new job of 32 distinct targets, stored (caps raised; the
URLs are under ``.invalid`` and no cluster runs). In one run, on one database:

1. **ASGI against gthread.** The Procfile's web line (gunicorn with two uvicorn workers serving
   ``sift_site.asgi``) and the line it replaced (gunicorn gthread, 2 workers x 8 threads, serving
   ``sift_site.wsgi``), both up at once, no stream open. ``--rounds`` rounds; in each, a block of
   ``--requests`` sequential requests of each kind on one line, then on the other (which goes
   first alternates), so that a change in the machine's load falls on both alike.
2. **Streams open against none.** On the ASGI line, ``--rounds`` rounds of a block with no stream
   open and a block with ``--streams`` open (13 callers, 8 streams each, every stream following a
   job that stays open, so each process's job watch polls its streams' jobs 4 times a second);
   the streams are opened before their block and closed after it (which block goes first
   alternates).

Results go in docs/benchmarks.md ("Event streams").
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
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
from bench.job_api import stored_job
from bench.stats import percentile
from bench.submit import RAISED_CAP

PER_CALLER = 8  # the default share: streams are spread so that none is refused
CONTENT_CHARS = 3000
SUBMIT_TARGETS = 32
ASGI, GTHREAD = "ASGI (uvicorn workers)", "gthread (before)"
# The Procfile's web line before the event streams (commit c30b101^): WSGI on gthread workers.
GTHREAD_LINE = (
    "gunicorn sift_site.wsgi --config python:sift_site.gunicorn_hooks --bind 127.0.0.1:${PORT:-8000} "
    "--worker-class gthread --workers 2 --threads 8 --timeout 120 --forwarded-allow-ips '' "
    "--access-logfile - --access-logformat '%(h)s %(t)s \"%(m)s %(U)s\" %(s)s %(B)s %(M)sms'"
)
KINDS = ("GET /healthz", "GET /v1/batch/{id}", "POST /v1/batch")

Samples = dict[str, list[float]]  # kind → seconds


def procfile_web_line() -> str:
    line = next(line for line in (REPO / "Procfile").read_text().splitlines() if line.startswith("web:"))
    return line.partition(":")[2].strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def web_process(line: str, env: dict[str, str], log: Path) -> Iterator[int]:
    """``line`` (a Procfile web line) on a free port, once it answers; yields the port."""
    port = free_port()
    bin_dir = str(Path(sys.executable).parent)
    with open(log, "ab") as out:
        process = subprocess.Popen(
            ["sh", "-c", "exec " + line.replace("${PORT:-8000}", str(port))],
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
        yield port
    finally:
        stop(process)


def waiting_jobs(count: int) -> list[tuple[str, str]]:
    """(key, job id) pairs: one caller per ``PER_CALLER`` streams, each with a job that stays open."""
    from django.utils import timezone

    from batch.models import ApiKey, BatchJob, BatchTarget

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


def reader_and_job() -> tuple[str, str]:
    """The key of a caller and the id of its finished job, read by every job read."""
    from batch.models import ApiKey

    caller, key = ApiKey.issue("bench-streams-reader")
    return key, stored_job(caller, "reader", CONTENT_CHARS).id


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


def no_stream_left() -> None:
    """Closed streams' rows are deleted by their processes; the next block starts once they are."""
    from batch.models import EventStream

    deadline = time.monotonic() + 30
    while EventStream.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def timed(request: urllib.request.Request, status: int) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
        if response.status != status:
            raise RuntimeError(f"{request.full_url} answered {response.status}, not {status}")
    return time.perf_counter() - started


class Requests:
    """The three kinds of request, for one caller submitting and one reading."""

    def __init__(self, submitter_key: str, reader: tuple[str, str]) -> None:
        self.submitter_key = submitter_key
        self.reader_key, self.job_id = reader
        self.sent = 0

    def block(self, port: int, requests: int, into: Samples) -> None:
        base = f"http://127.0.0.1:{port}"
        kinds: dict[str, Callable[[], float]] = {
            KINDS[0]: lambda: timed(urllib.request.Request(f"{base}/healthz"), 200),
            KINDS[1]: lambda: timed(self._get(f"{base}/v1/batch/{self.job_id}", self.reader_key), 200),
            KINDS[2]: lambda: timed(self._submit(base), 202),
        }
        for kind, request in kinds.items():
            into.setdefault(kind, []).extend(request() for _ in range(requests))

    def _get(self, url: str, key: str) -> urllib.request.Request:
        return urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})

    def _submit(self, base: str) -> urllib.request.Request:
        self.sent += 1
        targets = [f"https://s{self.sent}.bench.invalid/{i}" for i in range(SUBMIT_TARGETS)]
        return urllib.request.Request(
            f"{base}/v1/batch",
            data=json.dumps({"targets": targets}).encode(),
            headers={"Authorization": f"Bearer {self.submitter_key}", "Content-Type": "application/json"},
        )


def table(title: str, columns: dict[str, Samples]) -> list[str]:
    names = list(columns)
    head = (
        "| "
        + title
        + " | "
        + " | ".join(f"{name} p50 / p95 ms" for name in names)
        + " | p50 ratio (2nd / 1st) |"
    )
    lines = [head, "|---" * (len(names) + 2) + "|"]
    for kind in KINDS:
        p50s = [percentile(columns[name][kind], 50) * 1000 for name in names]
        cells = [
            f"{p50:.1f} / {percentile(columns[name][kind], 95) * 1000:.1f}"
            for p50, name in zip(p50s, names, strict=True)
        ]
        lines.append(f"| {kind} | " + " | ".join(cells) + f" | {p50s[-1] / p50s[0]:.2f} |")
    return lines


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@contextmanager
def log_tails_on_error(work: Path) -> Iterator[None]:
    """After an error, what the web processes logged last (their files go with ``work``)."""
    try:
        yield
    except Exception:
        for log in sorted(work.glob("*.log")):
            print(f"--- the last lines of {log.name}", file=sys.stderr)
            print("\n".join(log.read_text(errors="replace").splitlines()[-40:]), file=sys.stderr)
        raise


def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="sift-bench-streams-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        (work / "metrics").mkdir()
        if args.postgres:
            from bench.postgres import BenchDatabase

            database_url = stack.enter_context(BenchDatabase("sift_events_bench").fresh()).url
        else:
            database_url = f"sqlite:///{work / 'db.sqlite3'}"
        caps = {"SIFT_BATCH_JOBS_PER_CALLER": str(RAISED_CAP), "SIFT_BATCH_JOBS_TOTAL": str(RAISED_CAP)}
        env = service_env(database_url, work / "metrics", SIFT_FETCH_ONLY_ALLOWED="true", **caps)
        stack.enter_context(django_in_process(env))
        migrate_and_issue_caller("bench-streams-probe")
        from batch.models import ApiKey

        _, submitter_key = ApiKey.issue("bench-streams-submitter")
        requests = Requests(submitter_key, reader_and_job())
        pairs = waiting_jobs(args.streams)
        ports = {
            ASGI: stack.enter_context(web_process(procfile_web_line(), env, work / "asgi.log")),
            GTHREAD: stack.enter_context(web_process(GTHREAD_LINE, env, work / "gthread.log")),
        }
        stack.enter_context(log_tails_on_error(work))
        for port in ports.values():
            requests.block(port, 10, {})  # warm up every worker: imports, connections
        loads = [loadavg()]
        lines: dict[str, Samples] = {GTHREAD: {}, ASGI: {}}
        for n in range(args.rounds):
            for name in (ASGI, GTHREAD) if n % 2 == 0 else (GTHREAD, ASGI):
                requests.block(ports[name], args.requests, lines[name])
        loads.append(loadavg())
        open_label = f"{args.streams} streams open"
        streams: dict[str, Samples] = {"no stream": {}, open_label: {}}
        for n in range(args.rounds):
            if n % 2 == 0:
                requests.block(ports[ASGI], args.requests, streams["no stream"])
            sockets = open_streams(ports[ASGI], pairs, args.streams)
            time.sleep(1)
            requests.block(ports[ASGI], args.requests, streams[open_label])
            for sock in sockets:
                sock.close()
            no_stream_left()
            if n % 2 == 1:
                requests.block(ports[ASGI], args.requests, streams["no stream"])
        loads.append(loadavg())
        database = database_url.split(":")[0]
        print(
            f"{args.rounds} rounds of {args.requests} sequential requests a kind and column;",
            f"database {database}",
        )
        print("\n".join(table("ASGI against gthread, no stream", lines)))
        print()
        print("\n".join(table("the ASGI line, streams open", streams)))
        print("load average (1, 5, 15 min) at the start, between the parts, at the end:", " | ".join(loads))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--postgres", action="store_true", help="a fresh database on 127.0.0.1:5432")
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    return run_until_interrupted(lambda: bench(args))


if __name__ == "__main__":
    sys.exit(main())
