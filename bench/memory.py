"""Benchmark: the memory of the deployment ``make run`` starts, before any render and with the browser up.

    nice -n 5 .venv/bin/python -m bench.memory [--chromium PATH]

One command does everything: a throwaway SQLite database in a temporary directory (migrated, one
API key), then the Procfile started by honcho as ``make run`` starts it (every process on
127.0.0.1, metrics files in the temporary directory, the render socket there too). Once
``/healthz`` and ``/mcp`` answer, every cluster worker has written its heartbeat and no process
has started or ended for a few seconds, the proportional set size (PSS, from
``/proc/<pid>/smaps_rollup``) of every process under honcho is listed and summed: pages shared
between processes (a forked worker's copy of its parent, the interpreter's own files) are counted
once in all (and with every other process on the machine that maps the same files: another
Chromium running beside lowers ours, so the count of those is printed; USS, the pages no other
process maps, is the floor). Then one fetch and one render of a page served on 127.0.0.1
(``SIFT_FETCH_ALLOW_CIDRS=127.0.0.0/8``, as the other benchmarks do), the same listing again (the
render line's Chromium included), and everything is stopped: honcho with SIGINT, as Ctrl-C
stops ``make run``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import harness, render_pages
from bench.harness import LOOPBACK, REPO
from bench.mcp_latency import answers, free_port
from fetch.sandbox import proctree

BIN = Path(sys.executable).parent
SETTLED_SECONDS = 5.0
PAGE = (
    b"<!doctype html><html><head><title>Tides</title></head><body><article><h1>Tides</h1>"
    + (b"<p>Tides are the rise and fall of sea levels caused by the Moon and the Sun.</p>" * 30)
    + b"</article></body></html>"
)


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for pid, parent in proctree.parents().items():
        children.setdefault(parent, []).append(pid)
    return children


def tree(root: int) -> list[int]:
    """``root`` and every process under it, parents first."""
    children = _children()
    order, stack = [], [root]
    while stack:
        pid = stack.pop(0)
        order.append(pid)
        stack[:0] = sorted(children.get(pid, []))
    return order


def pss(pid: int) -> tuple[int, int]:
    """The process's proportional set size and its unique set size (pages no other process maps)."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    fields = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in rollup.splitlines()[1:]}
    return fields.get("Pss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


def others_chromium(ours: set[int]) -> int:
    """Chromium processes on this machine outside the tree measured: they map the same files,
    so the PSS of ours is lower while they run."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in ours:
            try:
                count += "chromium" in Path(f"/proc/{entry}/comm").read_text()
            except OSError:
                continue
    return count


def command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    words = raw.rstrip(b"\0").decode(errors="replace").split("\0")
    text = " ".join(w.replace(f"{BIN}/", "").replace(f"{REPO}/", "") for w in words)
    return text if len(text) <= 90 else text[:87] + "..."


def measure(label: str, root: int) -> int:
    """Print every process under ``root`` with its PSS and USS; answer the sum of PSS."""
    rows = [(pid, *pss(pid), command(pid)) for pid in tree(root)]
    total, unique = sum(row[1] for row in rows), sum(row[2] for row in rows)
    print(
        f"\n{label}: {len(rows)} processes, {total / 1e6:.0f} MB PSS ({total / 2**20:.0f} MiB),"
        f" {unique / 1e6:.0f} MB USS; Chromium processes of others on the machine:"
        f" {others_chromium({row[0] for row in rows})}"
    )
    print(f"{'pid':>8} {'PSS MB':>7} {'USS MB':>7}  command")
    for pid, size, own, text in rows:
        print(f"{pid:>8} {size / 1e6:>7.1f} {own / 1e6:>7.1f}  {text}")
    return total


def wait_for(what: str, ready: Callable[[], bool], process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + harness.READY_TIMEOUT_SECONDS
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


def wait_settled(root: int) -> None:
    """Until no process under ``root`` has started or ended for ``SETTLED_SECONDS``."""
    deadline = time.monotonic() + 2 * harness.READY_TIMEOUT_SECONDS
    seen, since = set(tree(root)), time.monotonic()
    while time.monotonic() - since < SETTLED_SECONDS and time.monotonic() < deadline:
        time.sleep(0.5)
        now = set(tree(root))
        if now != seen:
            seen, since = now, time.monotonic()


@contextmanager
def honcho(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``make run``'s last command, stopped with SIGINT (Ctrl-C) on the way out."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(BIN / "honcho"), "start", "--port", env["PORT"], "--procfile", "Procfile"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def fetch(port: int, key: str, url: str, render: bool) -> str:
    """One ``POST /v1/fetch``; prints how long it took (the first fetch of a web worker starts
    its sandbox child)."""
    started = time.monotonic()
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=120)
    body = json.dumps({"url": url, "options": {"render": render}})
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    try:
        connection.request("POST", "/v1/fetch", body=body, headers=headers)
        response = connection.getresponse()
        answer = json.loads(response.read())
    finally:
        connection.close()
    if response.status != 200 or "Tides" not in answer.get("content", ""):
        raise RuntimeError(f"POST /v1/fetch (render {render}) answered {response.status}: {answer}")
    print(f"POST /v1/fetch, render {str(render).lower()}: {time.monotonic() - started:.2f} s")
    return str(answer.get("rendered"))


def bench(chromium: str | None = None) -> None:
    with tempfile.TemporaryDirectory(prefix="sift-bench-memory-") as tmp_name:
        tmp = Path(tmp_name)
        port, mcp_port = free_port(), free_port()
        env = harness.service_env(
            f"sqlite:///{tmp / 'bench.sqlite3'}",
            tmp / "metrics",
            PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            PORT=str(port),
            MCP_PORT=str(mcp_port),
            SIFT_FETCH_ALLOW_CIDRS="127.0.0.0/8",
            SIFT_RENDER_SOCKET=str(tmp / "render.sock"),
            **({"SIFT_RENDER_CHROMIUM": chromium} if chromium else {}),
        )
        with harness.django_in_process(env):
            from django.conf import settings

            from batch.models import ClusterHeartbeat
            from fetch.render import server_process

            print(f"browser: {settings.SIFT_RENDER_CHROMIUM}")
            key = migrate_and_key()
            workers = settings.SIFT_BATCH_WORKERS
            log = tmp / "honcho.log"
            with (
                render_pages.serving({"/tides": ("text/html; charset=utf-8", PAGE)}) as page_port,
                honcho(env, log) as process,
            ):
                try:
                    wait_for("web", lambda: answers(port, "/healthz"), process, log)
                    wait_for("mcp", lambda: answers(mcp_port, "/mcp"), process, log)
                    wait_for("the cluster", lambda: ClusterHeartbeat.objects.count() >= workers, process, log)
                    wait_settled(process.pid)
                    before = measure("started, before any fetch", process.pid)
                    url = f"http://{LOOPBACK}:{page_port}/tides"
                    fetch(port, key, url, render=False)
                    rendered = fetch(port, key, url + "?render", render=True)
                    wait_settled(process.pid)
                    after = measure(f"after one fetch and one render (rendered: {rendered})", process.pid)
                finally:
                    server_process.stop_server()
        print(f"\ntotal PSS: {before / 1e6:.0f} MB before any render, {after / 1e6:.0f} MB after")
        print(f"load: {Path('/proc/loadavg').read_text().split()[:3]}")


def migrate_and_key() -> str:
    from django.core.management import call_command

    from batch.models import ApiKey

    call_command("migrate", verbosity=0, interactive=False)
    _, key = ApiKey.issue("bench")
    return str(key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chromium", metavar="PATH", help="SIFT_RENDER_CHROMIUM (default: its default)")
    args = parser.parse_args()
    return harness.run_until_interrupted(lambda: bench(args.chromium))


if __name__ == "__main__":
    sys.exit(main())
