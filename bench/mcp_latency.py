"""Benchmark: a ``fetch`` of a cached document through ``/mcp`` against ``GET /v1/fetch``.

    .venv/bin/python -m bench.mcp_latency [--calls 200] [--warmup 10]

One command does everything: a throwaway SQLite database in a temporary directory, one API key,
a page served on 127.0.0.1, the Procfile's ``web`` and ``mcp`` lines started as written on free
loopback ports, one fetch to put the page in the document cache, then ``--calls`` timed calls
for each row, one after the other on one keep-alive connection, and the processes stopped again
(also on Ctrl-C or an error).

Rows:

- ``GET /v1/fetch``: the REST API (gunicorn), read with http.client.
- ``MCP tools/call, raw POST``: the same fetch as one JSON-RPC POST (handshake era header, no
  session), read with http.client: what the server side of MCP costs.
- ``MCP tools/call, SDK client``: ``Client.call_tool`` of the official SDK in its default mode
  (per-request era): what an agent built on the SDK sees, client-side parsing included.

Every call answers the cached copy (``cached: true`` is checked), so the rows compare the doors,
not the network. Traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench import harness, stats
from bench.harness import LOOPBACK, REPO

BIN = Path(sys.executable).parent
PAGE = (
    b"<!doctype html><html lang='en'><head><title>Tides explained</title></head><body><article>"
    b"<h1>Tides explained</h1>"
    + b"<p>Tides are the rise and fall of sea levels caused by the gravity of the Moon and the Sun.</p>" * 40
    + b"</article></body></html>"
)


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer((LOOPBACK, 0), _Page)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{LOOPBACK}:{server.server_address[1]}/tides"
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def procfile_line(name: str) -> str:
    line = next(x for x in (REPO / "Procfile").read_text().splitlines() if x.startswith(f"{name}:"))
    return line.removeprefix(f"{name}:").strip()


@contextmanager
def procfile_process(name: str, env: dict[str, str], log: Path, ready: Callable[[], bool]) -> Iterator[None]:
    """The Procfile's ``name`` line as written, run by a shell as honcho does; stopped on the way out."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["sh", "-c", f"exec {procfile_line(name)}"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + harness.READY_TIMEOUT_SECONDS
        while not ready():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the {name} process did not come up:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield
    finally:
        harness.stop(process)


def answers(port: int, path: str) -> bool:
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=2)
    try:
        connection.request("GET", path)
        connection.getresponse().read()
        return True
    except OSError:
        return False
    finally:
        connection.close()


def timed(calls: int, warmup: int, one: Callable[[], None]) -> list[float]:
    for _ in range(warmup):
        one()
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        one()
        seconds.append(time.perf_counter() - started)
    return seconds


def rest_calls(port: int, key: str, url: str, calls: int, warmup: int, *, cached: bool = True) -> list[float]:
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=30)
    path = "/v1/fetch?" + urllib.parse.urlencode({"url": url})

    def one() -> None:
        connection.request("GET", path, headers={"Authorization": f"Bearer {key}"})
        response = connection.getresponse()
        body = json.loads(response.read())
        if response.status != 200 or body["cached"] is not cached:
            raise RuntimeError(f"GET /v1/fetch answered {response.status}: {body}")

    try:
        return timed(calls, warmup, one)
    finally:
        connection.close()


def raw_mcp_calls(port: int, key: str, url: str, calls: int, warmup: int) -> list[float]:
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=30)
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body = json.dumps({**request, "params": {"name": "fetch", "arguments": {"url": url}}})
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }

    def one() -> None:
        connection.request("POST", "/mcp", body=body, headers=headers)
        response = connection.getresponse()
        answer = json.loads(response.read())
        result = answer.get("result", {})
        if response.status != 200 or result.get("isError") or not result["structuredContent"]["cached"]:
            raise RuntimeError(f"tools/call answered {response.status}: {answer}")

    try:
        return timed(calls, warmup, one)
    finally:
        connection.close()


def sdk_mcp_calls(port: int, key: str, url: str, calls: int, warmup: int) -> tuple[str, list[float]]:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> tuple[str, list[float]]:
        headers = {"Authorization": f"Bearer {key}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(f"http://{LOOPBACK}:{port}/mcp", http_client=http)) as client,
        ):
            seconds = []
            for i in range(warmup + calls):
                started = time.perf_counter()
                result = await client.call_tool("fetch", {"url": url})
                elapsed = time.perf_counter() - started
                if result.is_error or not result.structured_content["cached"]:
                    raise RuntimeError(f"call_tool answered {result}")
                if i >= warmup:
                    seconds.append(elapsed)
            return client.protocol_version, seconds

    return anyio.run(main)


def row(name: str, seconds: list[float], baseline: list[float] | None = None) -> str:
    median = stats.median(seconds) * 1000
    p90 = stats.percentile(seconds, 90) * 1000
    ratio = f"{median / (stats.median(baseline) * 1000):.2f}x" if baseline else "1.00x"
    return f"{name:<40} {len(seconds):>5} {median:>9.2f} {p90:>9.2f} {ratio:>8}"


def bench(calls: int, warmup: int) -> None:
    with tempfile.TemporaryDirectory(prefix="sift-bench-mcp-") as tmp_name, upstream() as url:
        tmp = Path(tmp_name)
        web_port, mcp_port = free_port(), free_port()
        env = harness.service_env(
            f"sqlite:///{tmp / 'bench.sqlite3'}",
            tmp / "metrics",
            PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            PORT=str(web_port),
            MCP_PORT=str(mcp_port),
            SIFT_FETCH_ALLOW_CIDRS=f"{LOOPBACK}/32",
            SIFT_CACHE_TTL="1h",
            LOG_LEVEL="WARNING",
        )
        with harness.django_in_process(env):
            from django.core.management import call_command

            from batch.models import ApiKey

            call_command("migrate", verbosity=0, interactive=False)
            _, key = ApiKey.issue("bench")
        with (
            procfile_process("web", env, tmp / "web.log", lambda: answers(web_port, "/healthz")),
            procfile_process("mcp", env, tmp / "mcp.log", lambda: answers(mcp_port, "/mcp")),
        ):
            rest_calls(web_port, key, url, 1, 0, cached=False)  # the one real download: into the cache
            rest = rest_calls(web_port, key, url, calls, warmup)
            raw = raw_mcp_calls(mcp_port, key, url, calls, warmup)
            version, sdk = sdk_mcp_calls(mcp_port, key, url, calls, warmup)
        print(f"fetch of a cached {len(PAGE)}-byte page, SQLite, one connection, sequential calls")
        print(f"web: {procfile_line('web')}")
        print(f"mcp: {procfile_line('mcp')}")
        print(f"{'door':<40} {'calls':>5} {'median ms':>9} {'p90 ms':>9} {'vs REST':>8}")
        print(row("GET /v1/fetch", rest))
        print(row("MCP tools/call, raw POST", raw, rest))
        print(row(f"MCP tools/call, SDK client ({version})", sdk, rest))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    return harness.run_until_interrupted(lambda: bench(args.calls, args.warmup))


if __name__ == "__main__":
    sys.exit(main())
